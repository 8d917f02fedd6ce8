// One element-wise kernel for any formula: out[i] = f(in_1[i], ..., in_k[i]) over operands of one
// shape, written once as a functor F (a struct whose __device__ operator() maps the stored
// input values to the stored output value). map_elements picks the path on the host, uniform
// across the grid:
//   - every operand contiguous (its dims merge into one of stride 1) and 16-byte aligned: each
//     thread moves whole 16-byte vectors (one 128-bit load or store per operand on a GPU, where
//     scalar 2- or 4-byte accesses need 4 to 8 times as many memory instructions for the same
//     bytes), the last n mod W elements one by one;
//   - otherwise the strided walk of cuda/strided.h (views, broadcasts, transposes).
// The vector width W is 16 bytes of the widest operand type (4 floats, 8 bfloat16, 2 doubles), so
// a cast reads and writes whole vectors on both sides.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "tessera/cuda/grid.h"
#include "tessera/cuda/strided.h"

namespace tessera::cuda {

template <class T, int W>
struct alignas(sizeof(T) * W) Vec {
  T v[W];
};

template <class... T>
constexpr int vector_width() {
  return static_cast<int>(16 / std::max({sizeof(T)...}));
}

namespace map_detail {

template <class F, class Out, int W, class... In>
__device__ void map_vector(const F& f, Vec<Out, W>& out, const Vec<In, W>&... in) {
  for (int k = 0; k < W; ++k) out.v[k] = f(in.v[k]...);
}

template <int W, class F, class Out, class... In>
__global__ void map_contiguous(int64_t n, F f, Out* out, const In*... in) {
  const int64_t vectors = n / W;
  TS_GRID_STRIDE_LOOP(i, vectors) {
    Vec<Out, W> o;
    map_vector(f, o, reinterpret_cast<const Vec<In, W>*>(in)[i]...);
    reinterpret_cast<Vec<Out, W>*>(out)[i] = o;
  }
  const int64_t done = vectors * W;
  TS_GRID_STRIDE_LOOP(i, n - done) out[done + i] = f(in[done + i]...);
}

template <class F, class Out, size_t... K, class... In>
__device__ void map_at(const F& f, const int64_t* off, Out* out, std::index_sequence<K...>, const In*... in) {
  out[off[0]] = f(in[off[K + 1]]...);
}

template <class F, class Out, class... In>
__global__ void map_strided(StridedOffsets<1 + sizeof...(In)> layout, int64_t n, F f, Out* out, const In*... in) {
  TS_GRID_STRIDE_LOOP(i, n) {
    int64_t off[1 + sizeof...(In)];
    layout.offsets(i, off);
    map_at(f, off, out, std::index_sequence_for<In...>{}, in...);
  }
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace map_detail

// out = f(in...) element by element; `layout` is strided_offsets over (out, in...) and `name`
// the kernel's name in launches, profiles and errors.
template <class F, class Out, class... In>
void map_elements(const char* name, cudaStream_t stream, const StridedOffsets<1 + sizeof...(In)>& layout, int64_t n,
                  const F& f, Out* out, const In*... in) {
  if (n == 0) return;
  constexpr int W = vector_width<Out, In...>();
  bool contiguous = layout.ndim == 1 && map_detail::aligned16(out) && (map_detail::aligned16(in) && ...);
  for (int k = 0; contiguous && k < 1 + static_cast<int>(sizeof...(In)); ++k) contiguous = layout.strides[k][0] == 1;
  if (contiguous)
    launch(name, map_detail::map_contiguous<W, F, Out, In...>, blocks_for((n + W - 1) / W), kBlockThreads, 0, stream, n,
           f, out, in...);
  else
    launch(name, map_detail::map_strided<F, Out, In...>, blocks_for(n), kBlockThreads, 0, stream, layout, n, f, out,
           in...);
}

}  // namespace tessera::cuda
