// Elementwise ops: argument checks, broadcasting, dispatch to the device kernel, and the gradient
// formulas. Gradients of broadcast operands are summed back to the operand's shape with sum_to.
#include "tessera/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessera/autograd/function.h"
#include "tessera/ops/autocast_operands.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

// Whether t's elements fill its storage span without gaps or overlaps in some order of its dims
// (a contiguous tensor, a channels-last map, a transposed token grid).
bool dense_in_some_order(const Tensor& t) {
  std::vector<size_t> order(static_cast<size_t>(t.dim()));
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.stride(a) > t.stride(b); });
  int64_t expected = 1;
  for (size_t k = order.size(); k-- > 0;) {
    if (t.size(order[k]) == 1) continue;
    if (t.stride(order[k]) != expected) return false;
    expected *= t.size(order[k]);
  }
  return true;
}

// A fresh output of `shape` for an elementwise op: in the memory order of the first operand of that
// shape which lies densely in some order (contiguous or not), as PyTorch's TensorIterator lays out
// its outputs; else contiguous. The elementwise kernels of every device walk any strides,
// and an output that follows its input keeps a channels-last map (CoaT's position encoding adds
// its convolution to its input there) in that layout instead of transposing it on the way.
Tensor empty_following(const Shape& shape, DType dtype, Device device, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands)
    if (t->defined() && t->shape() == shape && dense_in_some_order(*t))
      return Tensor::empty_in_order(shape, t->strides(), dtype, device);
  return Tensor::empty(shape, dtype, device);
}

struct UnaryInfo {
  OpId op;
  const char* backward_name;
  bool saves_x;  // which of input/output the derivative needs
  bool saves_y;
};

UnaryInfo info(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return {OpId::neg, "NegBackward", false, false};
    case UnaryOp::Exp: return {OpId::exp, "ExpBackward", false, true};
    case UnaryOp::Log: return {OpId::log, "LogBackward", true, false};
    case UnaryOp::Sqrt: return {OpId::sqrt, "SqrtBackward", false, true};
    case UnaryOp::Rsqrt: return {OpId::rsqrt, "RsqrtBackward", false, true};
    case UnaryOp::Abs: return {OpId::abs, "AbsBackward", true, false};
    case UnaryOp::Tanh: return {OpId::tanh, "TanhBackward", false, true};
    case UnaryOp::Erf: return {OpId::erf, "ErfBackward", true, false};
    case UnaryOp::Sin: return {OpId::sin, "SinBackward", true, false};
    case UnaryOp::Cos: return {OpId::cos, "CosBackward", true, false};
    case UnaryOp::Sigmoid: return {OpId::sigmoid, "SigmoidBackward", false, true};
    case UnaryOp::Silu: return {OpId::silu, "SiluBackward", true, false};
    case UnaryOp::Relu: return {OpId::relu, "ReluBackward", true, false};
    case UnaryOp::GeluErf: return {OpId::gelu, "GeluBackward", true, false};
    case UnaryOp::GeluTanh: return {OpId::gelu, "GeluBackward", true, false};
    case UnaryOp::Pow: return {OpId::pow, "PowBackward", true, false};
    case UnaryOp::Clamp: return {OpId::clamp, "ClampBackward", true, false};
  }
  return {OpId::neg, "UnaryBackward", true, true};  // not reached: the switch covers every op
}

Tensor unary(const UnaryArgs& args, const Tensor& x) {
  TraceScope trace;
  const UnaryInfo in = info(args.op);
  const char* name = op_name(in.op);
  TS_CHECK(x.defined(), name, ": input is an undefined tensor");
  TS_CHECK(is_floating(x.dtype()), name, ": expected a floating tensor, got ", describe(x));
  Tensor y = empty_following(x.shape(), x.dtype(), x.device(), {&x});
  unary_kernel[x.device()](args, x, y);
  if (autograd::needs_grad({x})) {
    SavedTensor sx = in.saves_x ? SavedTensor(x) : SavedTensor();
    SavedTensor sy = in.saves_y ? SavedTensor(y) : SavedTensor();
    autograd::record(in.backward_name, {x}, y, [args, sx, sy, name](const Tensor& gy, const GradMask&) {
      Tensor xv = sx.defined() ? sx.unpack(name) : gy;  // placeholders where the formula needs nothing
      Tensor yv = sy.defined() ? sy.unpack(name) : gy;
      Tensor gx = empty_following(gy.shape(), gy.dtype(), gy.device(), {&gy, &xv});
      unary_backward_kernel[gy.device()](args, xv, yv, gy, gx);
      return std::vector<Tensor>{gx};
    });
  }
  // a and b: pow's exponent, clamp's bounds; gelu's form.
  if (trace.outermost())
    trace.record(in.op, {x}, {y}, {{"a", args.a}, {"b", args.b}, {"tanh", int64_t{args.op == UnaryOp::GeluTanh}}});
  return y;
}

OpId binary_op(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return OpId::add;
    case BinaryOp::Sub: return OpId::sub;
    case BinaryOp::Mul: return OpId::mul;
    case BinaryOp::Div: return OpId::div;
    case BinaryOp::Pow: return OpId::pow;
    case BinaryOp::Maximum: return OpId::maximum;
    case BinaryOp::Minimum: return OpId::minimum;
    case BinaryOp::Eq: return OpId::eq;
    case BinaryOp::Ne: return OpId::ne;
    case BinaryOp::Lt: return OpId::lt;
    case BinaryOp::Le: return OpId::le;
    case BinaryOp::Gt: return OpId::gt;
    case BinaryOp::Ge: return OpId::ge;
  }
  return OpId::add;  // not reached: the switch covers every op
}

void check_pair(const Tensor& a, const Tensor& b, const char* op) {
  TS_CHECK(a.defined() && b.defined(), op, ": an operand is an undefined tensor");
  TS_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch, ", describe(a), " vs ", describe(b),
           " (convert one with .to(dtype))");
  TS_CHECK(a.device() == b.device(), op, ": operands on different devices, ", describe(a), " vs ", describe(b));
}

// The forward computation without autograd: broadcast, allocate, dispatch.
Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b) {
  TraceScope trace;
  const char* name = op_name(binary_op(op));
  check_pair(a, b, name);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty_following(shape, is_comparison(op) ? DType::Bool : a.dtype(), a.device(), {&a, &b});
  binary_kernel[a.device()](op, a.detach().expand(shape), b.detach().expand(shape), out);
  if (trace.outermost()) trace.record(binary_op(op), {a, b}, {out});
  return out;
}

// Gradients of out = a∘b w.r.t. a and b, summed back to the operands' shapes. `a`, `b`, `out`
// are only defined when the op's formula needs them (add/sub need none).
std::vector<Tensor> binary_grads(BinaryOp op, const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& out,
                                 const Shape& a_shape, const Shape& b_shape, const GradMask& needs) {
  Tensor ga, gb;
  switch (op) {
    case BinaryOp::Add:
      ga = g;
      gb = g;
      break;
    case BinaryOp::Sub:
      ga = g;
      if (needs[1]) gb = -g;
      break;
    case BinaryOp::Mul:
      if (needs[0]) ga = g * b;
      if (needs[1]) gb = g * a;
      break;
    case BinaryOp::Div:
      if (needs[0]) ga = g / b;
      if (needs[1]) gb = -(g * out) / b;
      break;
    case BinaryOp::Pow:  // d/da a^b = b·a^(b-1); d/db a^b = a^b·log(a), taken as 0 where a == 0
      if (needs[0]) ga = g * b * pow(a, b - 1.0);
      if (needs[1]) gb = where(eq(a, scalar_like(0.0, a)), scalar_like(0.0, g), g * out * log(a));
      break;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {  // ties split the gradient evenly
      Tensor a_wins = where(op == BinaryOp::Maximum ? gt(a, b) : lt(a, b), scalar_like(1.0, g), scalar_like(0.0, g));
      Tensor tie = where(eq(a, b), scalar_like(0.5, g), scalar_like(0.0, g));
      if (needs[0]) ga = g * (a_wins + tie);
      if (needs[1]) gb = g * ((1.0 - a_wins) - tie);
      break;
    }
    default: break;
  }
  return {needs[0] && ga.defined() ? sum_to(ga, a_shape) : Tensor(),
          needs[1] && gb.defined() ? sum_to(gb, b_shape) : Tensor()};
}

const char* backward_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "AddBackward";
    case BinaryOp::Sub: return "SubBackward";
    case BinaryOp::Mul: return "MulBackward";
    case BinaryOp::Div: return "DivBackward";
    case BinaryOp::Pow: return "PowBackward";
    case BinaryOp::Maximum: return "MaximumBackward";
    default: return "MinimumBackward";
  }
}

Tensor binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autocast_meet(a_in, b_in);
  Tensor out = binary_forward(op, a, b);
  if (is_comparison(op) || !autograd::needs_grad({a, b})) return out;
  // Save only what the formula reads: mul needs the other operand, div and pow the output too.
  const bool keep_inputs = op != BinaryOp::Add && op != BinaryOp::Sub;
  const bool keep_out = op == BinaryOp::Div || op == BinaryOp::Pow;
  autograd::record(backward_name(op), {a, b}, out,
                   [op, sa = keep_inputs ? SavedTensor(a) : SavedTensor(),
                    sb = keep_inputs ? SavedTensor(b) : SavedTensor(), so = keep_out ? SavedTensor(out) : SavedTensor(),
                    a_shape = a.shape(), b_shape = b.shape()](const Tensor& g, const GradMask& needs) {
                     const char* name = op_name(binary_op(op));
                     return binary_grads(op, g, sa.defined() ? sa.unpack(name) : Tensor(),
                                         sb.defined() ? sb.unpack(name) : Tensor(),
                                         so.defined() ? so.unpack(name) : Tensor(), a_shape, b_shape, needs);
                   });
  return out;
}

}  // namespace

Tensor neg(const Tensor& x) { return unary({UnaryOp::Neg}, x); }
Tensor exp(const Tensor& x) { return unary({UnaryOp::Exp}, x); }
Tensor log(const Tensor& x) { return unary({UnaryOp::Log}, x); }
Tensor sqrt(const Tensor& x) { return unary({UnaryOp::Sqrt}, x); }
Tensor rsqrt(const Tensor& x) { return unary({UnaryOp::Rsqrt}, x); }
Tensor abs(const Tensor& x) { return unary({UnaryOp::Abs}, x); }
Tensor tanh(const Tensor& x) { return unary({UnaryOp::Tanh}, x); }
Tensor erf(const Tensor& x) { return unary({UnaryOp::Erf}, x); }
Tensor sin(const Tensor& x) { return unary({UnaryOp::Sin}, x); }
Tensor cos(const Tensor& x) { return unary({UnaryOp::Cos}, x); }
Tensor sigmoid(const Tensor& x) { return unary({UnaryOp::Sigmoid}, x); }
Tensor silu(const Tensor& x) { return unary({UnaryOp::Silu}, x); }
Tensor relu(const Tensor& x) { return unary({UnaryOp::Relu}, x); }
Tensor gelu(const Tensor& x, bool approximate) {
  return unary({approximate ? UnaryOp::GeluTanh : UnaryOp::GeluErf}, x);
}
Tensor pow(const Tensor& x, double exponent) { return unary({UnaryOp::Pow, exponent}, x); }
Tensor clamp(const Tensor& x, double lo, double hi) {
  TS_CHECK(lo <= hi, "clamp: min ", lo, " is greater than max ", hi);
  return unary({UnaryOp::Clamp, lo, hi}, x);
}
Tensor clamp_min(const Tensor& x, double lo) { return clamp(x, lo, INFINITY); }
Tensor clamp_max(const Tensor& x, double hi) { return clamp(x, -INFINITY, hi); }

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::Ge, a, b); }

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  constexpr const char* op = op_name(OpId::where);  // for messages and saved tensors
  TraceScope trace;
  const auto [a, b] = autocast_meet(a_in, b_in);
  check_pair(a, b, op);
  TS_CHECK(cond.defined() && cond.dtype() == DType::Bool, "where: condition must be a bool tensor, got ",
           describe(cond));
  TS_CHECK(cond.device() == a.device(), "where: condition on ", cond.device().str(), ", values on ", a.device().str());
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), op), b.shape(), op);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  where_kernel[a.device()](cond.detach().expand(shape), a.detach().expand(shape), b.detach().expand(shape), out);
  if (autograd::needs_grad({a, b}))
    autograd::record(
        "WhereBackward", {a, b}, out,
        [sc = SavedTensor(cond), a_shape = a.shape(), b_shape = b.shape()](const Tensor& g, const GradMask& needs) {
          Tensor c = sc.unpack(op), zero = constant_scalar(0.0, g);
          return std::vector<Tensor>{needs[0] ? sum_to(where(c, g, zero), a_shape) : Tensor(),
                                     needs[1] ? sum_to(where(c, zero, g), b_shape) : Tensor()};
        });
  if (trace.outermost()) trace.record(OpId::where, {cond, a, b}, {out});
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return where(mask, constant_scalar(value, x), x);
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, constant_scalar(b, a)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, constant_scalar(b, a)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, constant_scalar(b, a)); }
Tensor operator/(const Tensor& a, double b) { return div(a, constant_scalar(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(constant_scalar(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(constant_scalar(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(constant_scalar(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(constant_scalar(a, b), b); }

}  // namespace tessera
