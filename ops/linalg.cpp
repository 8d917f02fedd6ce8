// matmul and linear: argument checks, broadcasting of batch dims, dispatch to the matmul kernel
// (ops/kernels/linalg.h), and the gradients
//   C = A·B:        dA = dC·Bᵀ,  dB = Aᵀ·dC   (summed over the batch dims an operand was broadcast on)
//   y = x·Wᵀ + b:   dx = dy·W,   dW = dyᵀ·x,  db = Σ_rows dy  (with dW's product: its epilogue on CUDA).
// Transposes are views: the kernel reads them as BLAS transpose flags, never as copies. An operand
// whose batch dims do not merge (q, k, v viewed out of a qkv projection) is copied once on a device
// (batch_ready, ops/kernels/linalg.h) so that its product is one library call, and the copy, not
// the view, is saved for the backward, which then needs no second copy; the backward makes its
// incoming gradient ready once for both its products.
#include "tessera/ops/linalg.h"

#include "tessera/autograd/function.h"
#include "tessera/core/autocast.h"
#include "tessera/autograd/flop_counter.h"
#include "tessera/ops/autocast_weights.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

void check_pair(const Tensor& a, const Tensor& b, const char* op, const char* a_name, const char* b_name) {
  TS_CHECK(a.defined(), op, ": ", a_name, " is an undefined tensor");
  TS_CHECK(b.defined(), op, ": ", b_name, " is an undefined tensor");
  TS_CHECK(is_floating(a.dtype()) && is_floating(b.dtype()), op, ": expected floating tensors, got ", describe(a),
           " and ", describe(b));
  TS_CHECK(a.dtype() == b.dtype() || autocast_for(a, b), op, ": dtype mismatch, ", describe(a), " vs ", describe(b),
           " (convert one with .to(dtype))");
  TS_CHECK(a.device() == b.device(), op, ": operands on different devices, ", describe(a), " vs ", describe(b));
}

Shape concat(Shape s, std::initializer_list<int64_t> tail) {
  s.insert(s.end(), tail);
  return s;
}

Shape batch_dims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// a [*ba, m, k] · b [*bb, k, n] for operands with at least 2 dims (checked by the caller), batch
// dims broadcast; for matrices a and b, a_row_sums (when defined, [m]) receives Σ_k a[i, k]
// (MatmulKernel). Records no graph: callers do (forward) or run with grad mode off (backward).
Tensor matmul_nd(const Tensor& a_in, const Tensor& b_in, const Tensor& a_row_sums = Tensor()) {
  const Tensor a = a_in.detach(), b = b_in.detach();
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const Shape ba = batch_dims(a), bb = batch_dims(b);
  // A matrix b shared by every batch entry of a contiguous a: one GEMM with the batch folded into
  // the rows, which is faster than many small ones.
  if (bb.empty() && !ba.empty() && a.is_contiguous())
    return matmul_nd(a.view({numel_of(ba) * m, k}), b).view(concat(ba, {m, n}));
  const Shape batch = broadcast_shapes(ba, bb, op_name(OpId::matmul));
  Tensor out = Tensor::empty(concat(batch, {m, n}), a.dtype(), a.device());
  matmul_kernel[a.device()](gemm_operand(a).expand(concat(batch, {m, k})),
                            gemm_operand(b).expand(concat(batch, {k, n})), Tensor(), out, a_row_sums);
  FlopCounter::add(out.numel() * k);  // forward and the gradients' GEMMs alike
  return out;
}

// 1-D operands of matmul become matrices: a [k] -> [1, k], b [k] -> [k, 1].
Tensor promote_a(const Tensor& a) { return a.dim() == 1 ? a.unsqueeze(0) : a; }
Tensor promote_b(const Tensor& b) { return b.dim() == 1 ? b.unsqueeze(1) : b; }

// dA = dC·Bᵀ (needs b) and dB = Aᵀ·dC (needs a) for the promoted operands (>= 2 dims), with g of
// the promoted output's shape. a or b may be undefined when its partner's gradient is not needed.
std::vector<Tensor> matmul_grads(const Tensor& g_in, const Tensor& a, const Shape& a_shape, const Tensor& b,
                                 const Shape& b_shape, const GradMask& needs) {
  const Tensor g = batch_ready(g_in);  // once for both products
  Tensor ga, gb;
  if (needs[0]) ga = sum_to(matmul_nd(g, b.transpose(-1, -2)), a_shape);
  if (needs[1]) {
    if (b_shape.size() == 2 && a.dim() > 2) {
      // b was shared by the whole batch: the sum over i of A_iᵀ·dC_i is one GEMM over the folded batch.
      const int64_t k = a.size(-1), n = g.size(-1), rows = numel_of(batch_dims(a)) * a.size(-2);
      gb = matmul_nd(a.reshape({rows, k}).t(), g.reshape({rows, n}));
    } else {
      gb = sum_to(matmul_nd(a.transpose(-1, -2), g), b_shape);
    }
  }
  return {ga, gb};
}

Shape promoted_a_shape(const Shape& s) { return s.size() == 1 ? Shape{1, s[0]} : s; }
Shape promoted_b_shape(const Shape& s) { return s.size() == 1 ? Shape{s[0], 1} : s; }

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  constexpr const char* op = op_name(OpId::matmul);  // for messages and saved tensors
  TraceScope trace;
  check_pair(a, b, op, "the first operand", "the second operand");
  // Autocast: compute in the low precision and keep the result in it, or return it as float32
  // (core/autocast.h); the casts are ops, so the gradients go through them and the backward GEMMs
  // run in the low precision too.
  if (const auto low = autocast_for(a, b))
    return autocast_result(matmul(autocast_cast(a, *low), autocast_cast(b, *low)));
  TS_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least one dim, got ", a.shape(), " @ ",
           b.shape());
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  TS_CHECK(ka == kb, "matmul: inner dimensions do not match, ", a.shape(), " @ ", b.shape(), " (", ka, " vs ", kb, ")");
  const Tensor ap = batch_ready(promote_a(a.detach())), bp = batch_ready(promote_b(b.detach()));
  const Shape ba = batch_dims(ap), bb = batch_dims(bp);
  for (size_t i = 1; i <= std::min(ba.size(), bb.size()); ++i) {
    const int64_t x = ba[ba.size() - i], y = bb[bb.size() - i];
    TS_CHECK(x == y || x == 1 || y == 1, "matmul: batch dims do not broadcast, ", a.shape(), " @ ", b.shape());
  }
  Tensor out = matmul_nd(ap, bp);
  // Remove the dims that 1-D promotion added.
  Shape shape = batch_dims(out);
  if (a.dim() > 1) shape.push_back(out.size(-2));
  if (b.dim() > 1) shape.push_back(out.size(-1));
  Tensor result = out.view(shape);
  if (autograd::needs_grad({a, b})) {
    // dA needs b and dB needs a: save each only when its partner wants a gradient (as the kernel
    // took it: promoted, and copied where batch_ready copied it).
    autograd::record("MatmulBackward", {a, b}, result,
                     [sa = autograd::needs_grad({b}) ? SavedTensor(ap) : SavedTensor(),
                      sb = autograd::needs_grad({a}) ? SavedTensor(bp) : SavedTensor(), out_shape = out.shape(),
                      a_shape = a.shape(), b_shape = b.shape()](const Tensor& g, const GradMask& needs) {
                       Tensor av = sa.defined() ? sa.unpack(op) : Tensor();
                       Tensor bv = sb.defined() ? sb.unpack(op) : Tensor();
                       std::vector<Tensor> grads = matmul_grads(g.reshape(out_shape), av, promoted_a_shape(a_shape), bv,
                                                                promoted_b_shape(b_shape), needs);
                       if (grads[0].defined()) grads[0] = grads[0].reshape(a_shape);
                       if (grads[1].defined()) grads[1] = grads[1].reshape(b_shape);
                       return grads;
                     });
  }
  if (trace.outermost()) trace.record(OpId::matmul, {a, b}, {result});
  return result;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  constexpr const char* op = op_name(OpId::linear);  // for messages and saved tensors
  TraceScope trace;
  check_pair(x, weight, op, "input", "weight");
  if (const auto low = autocast_for(x, weight))  // as in matmul above
    return autocast_result(
        linear(x.to(*low), autocast_cast(weight, *low), bias.defined() ? autocast_cast(bias, *low) : Tensor()));
  TS_CHECK(weight.dim() == 2, "linear: expected weight [out_features, in_features], got ", weight.shape());
  TS_CHECK(x.dim() >= 1, "linear: expected input [..., in_features], got a 0-d tensor");
  const int64_t in = weight.size(1), out_features = weight.size(0);
  TS_CHECK(x.size(-1) == in, "linear: input ", x.shape(), " has ", x.size(-1), " features but weight ", weight.shape(),
           " expects ", in);
  if (bias.defined()) {
    check_pair(x, bias, op, "input", "bias");
    TS_CHECK(bias.shape() == Shape{out_features}, "linear: expected bias [", out_features, "] for weight ",
             weight.shape(), ", got ", bias.shape());
  }
  // Every leading dim of x is a row of one GEMM: y2 [rows, out] = x2 [rows, in] · Wᵀ (+ b).
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = numel_of(lead);
  Tensor y = Tensor::empty({rows, out_features}, x.dtype(), x.device());
  matmul_kernel[x.device()](gemm_operand(x.detach().reshape({rows, in})), gemm_operand(weight.detach().t()),
                            bias.defined() ? bias.detach().contiguous() : Tensor(), y, Tensor());
  FlopCounter::add(rows * in * out_features);
  Tensor result = y.view(concat(lead, {out_features}));
  if (autograd::needs_grad({x, weight, bias})) {
    // dx needs W and dW needs x: save each only when its partner wants a gradient.
    autograd::record("LinearBackward", {x, weight, bias}, result,
                     [sx = autograd::needs_grad({weight}) ? SavedTensor(x) : SavedTensor(),
                      sw = autograd::needs_grad({x}) ? SavedTensor(weight) : SavedTensor(), x_shape = x.shape(), rows,
                      in, out_features](const Tensor& g, const GradMask& needs) {
                       const Tensor g2 = g.reshape({rows, out_features});
                       Tensor gx, gw, gb;
                       if (needs[0]) gx = matmul_nd(g2, sw.unpack(op)).view(x_shape);
                       if (needs[1]) {
                         // The bias gradient Σ_rows g2 comes with dW = g2ᵀ·x, as the row sums of g2ᵀ.
                         if (needs[2]) gb = Tensor::empty({out_features}, g2.dtype(), g2.device());
                         gw = matmul_nd(g2.t(), sx.unpack(op).reshape({rows, in}), gb);
                       } else if (needs[2]) {
                         gb = sum(g2, {0});
                       }
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  if (trace.outermost()) trace.record(OpId::linear, {x, weight, bias}, {result});
  return result;
}

}  // namespace tessera
