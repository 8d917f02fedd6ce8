// CUDA kernels of xca_attention_map (ops/kernels/xca_attention_map.h; the arithmetic per row and
// column: cuda/xca_map.h): a thread per row of the small d×d matrices (d is 32 to 64 in XCiT), the
// backward's column terms in a second pass with a thread per column, adding the rows in order.
// bfloat16 and float16 compute in float32.
#include <type_traits>

#include "tessera/cuda/device.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/xca_map.h"
#include "tessera/ops/kernels/xca_attention_map.h"

namespace tessera::cuda {

namespace {

template <class S, class A>
__global__ void xca_attention_map_rows(const S* s, const S* nq, const S* nk, const A* t, A eps, int64_t M, int64_t d,
                                       int64_t heads, A* w, S* a) {
  TS_GRID_STRIDE_LOOP(r, M * d) xca_map_row(s, nq, nk, t, eps, d, heads, r, w, a);
}

template <class S, class A>
__global__ void xca_attention_map_backward_rows(const S* ga, const S* a, const S* s, const S* nq, const S* nk,
                                                const A* t, A eps, int64_t M, int64_t d, int64_t heads, S* gs,
                                                A* row_terms, A* q_coef, A* dots) {
  TS_GRID_STRIDE_LOOP(r, M * d)
  xca_map_backward_row(ga, a, s, nq, nk, t, eps, d, heads, r, gs, row_terms, q_coef, dots);
}

template <class S, class A>
__global__ void xca_attention_map_backward_columns(const S* ga, const S* a, const S* s, const S* nq, const S* nk,
                                                   const A* t, A eps, const A* dots, int64_t M, int64_t d,
                                                   int64_t heads, A* k_coef) {
  TS_GRID_STRIDE_LOOP(col, M * d) xca_map_backward_column(ga, a, s, nq, nk, t, eps, dots, d, heads, col, k_coef);
}

}  // namespace

void xca_attention_map(const Tensor& s, const Tensor& nq, const Tensor& nk, const Tensor& t, double eps,
                       const Tensor& a) {
  const int64_t M = s.size(0), d = s.size(1);
  if (M * d == 0) return;
  KernelContext ctx(a);
  dispatch_floating(s.dtype(), "xca_attention_map", [&]<class S, class A>() {
    const Tensor w = std::is_same_v<S, A> ? a : Tensor::empty({M * d * d}, DTypeOf<A>::value, a.device());
    launch("xca_attention_map", xca_attention_map_rows<S, A>, blocks_for(M * d), kBlockThreads, 0, ctx.stream,
           s.device_data<S>(), nq.device_data<S>(), nk.device_data<S>(), t.device_data<A>(), static_cast<A>(eps), M, d,
           t.numel(), w.device_data<A>(), a.device_data<S>());
  });
}

void xca_attention_map_backward(const Tensor& ga, const Tensor& a, const Tensor& s, const Tensor& nq, const Tensor& nk,
                                const Tensor& t, double eps, const Tensor& gs, const Tensor& row_terms,
                                const Tensor& q_coef, const Tensor& k_coef) {
  const int64_t M = s.size(0), d = s.size(1);
  if (M * d == 0) return;
  KernelContext ctx(a);
  dispatch_floating(s.dtype(), "xca_attention_map_backward", [&]<class S, class A>() {
    const Tensor dots = Tensor::empty({M * d}, DTypeOf<A>::value, s.device());
    launch("xca_attention_map_backward rows", xca_attention_map_backward_rows<S, A>, blocks_for(M * d), kBlockThreads,
           0, ctx.stream, ga.device_data<S>(), a.device_data<S>(), s.device_data<S>(), nq.device_data<S>(),
           nk.device_data<S>(), t.device_data<A>(), static_cast<A>(eps), M, d, t.numel(), gs.device_data<S>(),
           row_terms.device_data<A>(), q_coef.device_data<A>(), dots.device_data<A>());
    launch("xca_attention_map_backward columns", xca_attention_map_backward_columns<S, A>, blocks_for(M * d),
           kBlockThreads, 0, ctx.stream, ga.device_data<S>(), a.device_data<S>(), s.device_data<S>(),
           nq.device_data<S>(), nk.device_data<S>(), t.device_data<A>(), static_cast<A>(eps), dots.device_data<A>(), M,
           d, t.numel(), k_coef.device_data<A>());
  });
}

}  // namespace tessera::cuda
