// CUDA kernels of the elementwise family (formulas as ops/cpu/elementwise.cpp) over operands of any
// layout (inputs arrive expanded to the output's shape, so a broadcast operand has stride 0):
// unary, its derivative and binary through map_elements (cuda/map.h: 16-byte vectors when every
// operand is contiguous), compare and where a thread per element. The op is a runtime switch
// inside the kernel: uniform across the grid, so it costs no divergence. bfloat16 and float16
// compute in float32.
#include "tessera/cuda/device.h"
#include "tessera/cuda/device_math.h"
#include "tessera/cuda/dispatch.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/map.h"
#include "tessera/cuda/strided.h"
#include "tessera/cuda/unary_math.h"
#include "tessera/ops/kernels/convert.h"
#include "tessera/ops/kernels/elementwise.h"

namespace tessera::cuda {

namespace {

template <class T>
__device__ T binary_value(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Pow:
      if constexpr (std::is_floating_point_v<T>) return dm::pow(a, b);
      else return a;  // refused by the host (int64 has no pow)
    case BinaryOp::Maximum: return dm::max(a, b);
    case BinaryOp::Minimum: return dm::min(a, b);
    default: return a;
  }
}

template <class T>
__device__ bool compare_value(BinaryOp op, T u, T v) {
  switch (op) {
    case BinaryOp::Eq: return u == v;
    case BinaryOp::Ne: return u != v;
    case BinaryOp::Lt: return u < v;
    case BinaryOp::Le: return u <= v;
    case BinaryOp::Gt: return u > v;
    case BinaryOp::Ge: return u >= v;
    default: return false;
  }
}

// The element formulas, for map_elements (cuda/map.h): stored values in, the stored value out,
// the arithmetic in A.
template <class S, class A>
struct UnaryMap {
  UnaryArgs args;
  __device__ S operator()(S x) const { return convert::convert<A, S>(unary_value(args, convert::convert<S, A>(x))); }
};

template <class S, class A>
struct UnaryDerivativeMap {
  UnaryArgs args;
  __device__ S operator()(S x, S y, S gy) const {
    return convert::convert<A, S>(
        unary_derivative(args, convert::convert<S, A>(x), convert::convert<S, A>(y), convert::convert<S, A>(gy)));
  }
};

template <class S, class A>
struct BinaryMap {
  BinaryOp op;
  __device__ S operator()(S a, S b) const {
    return convert::convert<A, S>(binary_value(op, convert::convert<S, A>(a), convert::convert<S, A>(b)));
  }
};

// A half value converts to float32 exactly, so comparing in A is comparing the stored values.
template <class S, class A>
__global__ void compare_elements(StridedOffsets<3> layout, int64_t n, BinaryOp op, const S* a, const S* b, bool* out) {
  TS_GRID_STRIDE_LOOP(i, n) {
    int64_t off[3];
    layout.offsets(i, off);
    out[off[0]] = compare_value(op, convert::convert<S, A>(a[off[1]]), convert::convert<S, A>(b[off[2]]));
  }
}

// A pure selection: the stored values are copied, whatever their type.
template <class T>
__global__ void where_elements(StridedOffsets<4> layout, int64_t n, const bool* cond, const T* a, const T* b, T* out) {
  TS_GRID_STRIDE_LOOP(i, n) {
    int64_t off[4];
    layout.offsets(i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

void unary(const UnaryArgs& args, const Tensor& x, const Tensor& y) {
  KernelContext ctx(y);
  const auto layout = strided_offsets<2>(y.shape(), {&y, &x}, "unary");
  dispatch_floating(x.dtype(), "unary", [&]<class S, class A>() {
    map_elements("unary", ctx.stream, layout, y.numel(), UnaryMap<S, A>{args}, y.device_data<S>(), x.device_data<S>());
  });
}

void unary_backward(const UnaryArgs& args, const Tensor& x, const Tensor& y, const Tensor& gy, const Tensor& gx) {
  KernelContext ctx(gx);
  const auto layout = strided_offsets<4>(gx.shape(), {&gx, &x, &y, &gy}, "unary_backward");
  dispatch_floating(x.dtype(), "unary_backward", [&]<class S, class A>() {
    map_elements("unary_backward", ctx.stream, layout, gx.numel(), UnaryDerivativeMap<S, A>{args}, gx.device_data<S>(),
                 x.device_data<S>(), y.device_data<S>(), gy.device_data<S>());
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  KernelContext ctx(out);
  const auto layout = strided_offsets<3>(out.shape(), {&out, &a, &b}, "binary");
  if (is_comparison(op)) {
    dispatch_any(a.dtype(), "compare", [&]<class S, class A>() {
      launch("compare", compare_elements<S, A>, blocks_for(n), kBlockThreads, 0, ctx.stream, layout, n, op,
             a.device_data<S>(), b.device_data<S>(), out.device_data<bool>());
    });
    return;
  }
  if (a.dtype() == DType::Int64) {
    TS_CHECK(op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul || op == BinaryOp::Maximum ||
                 op == BinaryOp::Minimum,
             "binary op: int64 supports add, sub, mul, maximum and minimum only");
    map_elements("binary", ctx.stream, layout, n, BinaryMap<int64_t, int64_t>{op}, out.device_data<int64_t>(),
                 a.device_data<int64_t>(), b.device_data<int64_t>());
    return;
  }
  dispatch_floating(a.dtype(), "binary", [&]<class S, class A>() {
    map_elements("binary", ctx.stream, layout, n, BinaryMap<S, A>{op}, out.device_data<S>(), a.device_data<S>(),
                 b.device_data<S>());
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  KernelContext ctx(out);
  const auto layout = strided_offsets<4>(out.shape(), {&out, &cond, &a, &b}, "where");
  dispatch_any(a.dtype(), "where", [&]<class S, class A>() {
    launch("where", where_elements<S>, blocks_for(n), kBlockThreads, 0, ctx.stream, layout, n, cond.device_data<bool>(),
           a.device_data<S>(), b.device_data<S>(), out.device_data<S>());
  });
}

}  // namespace tessera::cuda
