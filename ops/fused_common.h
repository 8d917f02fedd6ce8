// What the front ends of the fused ops (ops/fused.h) share (internal): the operand checks of every
// one of them (check_parameter also serves the norms, ops/normalization.cpp), the views of a qkv
// projection's heads that the attention ops take, and the gradient through clamped row norms of
// xca_attention_map and xnorm_matmul.
#pragma once
#include "tessera/core/tensor.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"

namespace tessera {

inline void check_same(const Tensor& a, const Tensor& b, const char* op, const char* a_name, const char* b_name) {
  TS_CHECK(a.defined() && b.defined(), op, ": ", a_name, " or ", b_name, " is an undefined tensor");
  TS_CHECK(a.dtype() == b.dtype() && a.device() == b.device(), op, ": ", a_name, " is ", describe(a), " but ", b_name,
           " is ", describe(b));
}

// A per-channel parameter beside activation x: in x's accumulation dtype (core/dtype.h; float32
// beside a half-precision activation, the dtype itself otherwise), on x's device.
inline void check_parameter(const Tensor& x, const Tensor& p, const char* op, const char* p_name) {
  TS_CHECK(p.defined(), op, ": ", p_name, " is an undefined tensor");
  TS_CHECK(p.dtype() == accumulate_dtype(x.dtype()) && p.device() == x.device(), op, ": ", p_name, " is ", describe(p),
           " but the input is ", describe(x), " (expected ", dtype_name(accumulate_dtype(x.dtype())), " on ",
           x.device().str(), ")");
}

// t detached and contiguous, or undefined if it is: the data a kernel takes of an optional operand
// (a norm's weight and bias, talking heads' mixings).
inline Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? t.detach().contiguous() : Tensor(); }

// t [B, N, channels] (a qkv projection's output or a gradient of tokens) with unit stride along the
// channels, detached: as it lies where it has it, else copied once. Each head's q, k and v (or
// output) is then an N×d slice with an outer stride, which the attention kernels read in place.
inline Tensor unit_channels(const Tensor& t) { return t.stride(2) == 1 ? t.detach() : t.detach().contiguous(); }

// Part p of tokens [B, N, parts·h·d] (q, k, v of a qkv projection; the one part of an output) as
// [B, h, N, d] views.
inline Tensor head_part(const Tensor& tokens, int64_t parts, int64_t p, int64_t h, int64_t d) {
  return tokens.view({tokens.size(0), tokens.size(1), parts, h, d}).select(2, p).transpose(1, 2);
}

// The gradient reaching the rows of v [..., n] through their clamped norms q̄ = max(‖v‖, eps), given
// scaled_terms = −q̄·∂L/∂q̄ [...] (a kernel's row or column terms times the temperature or gamma):
// ∂L/∂q̄ · ∂‖v‖/∂v = −scaled_terms/q̄ · v/‖v‖ = −scaled_terms·v/q̄² where ‖v‖ ≥ eps, 0 where clamped.
// For float16 the per-row factor is computed in float32: eps (1e-12) rounds to 0 in float16 and a
// squared small norm underflows, so a zero row would divide by zero. (bfloat16 has float32's
// exponent range and needs no casts.)
inline Tensor grad_through_norm(const Tensor& scaled_terms, const Tensor& norms_in, const Tensor& v, double eps) {
  const DType acc = norms_in.dtype() == DType::Float16 ? DType::Float32 : norms_in.dtype();
  const Tensor norms = norms_in.to(acc), clamped = clamp_min(norms, eps);
  const Tensor g_norm =
      where(ge(norms, scalar_like(eps, norms)), -scaled_terms.to(acc) / (clamped * clamped), scalar_like(0.0, norms));
  return v * g_norm.unsqueeze(-1).to(v.dtype());
}

}  // namespace tessera
