#include "tessera/ops/autocast_operands.h"

#include <optional>

#include "tessera/core/autocast.h"
#include "tessera/ops/autocast_weights.h"

namespace tessera {

namespace {

// The autocast dtype when autocast is on at the tensors' device and they mix float32 with it.
std::optional<DType> mixed_low(const std::vector<const Tensor*>& tensors) {
  if (tensors.empty() || !tensors.front()->defined()) return std::nullopt;
  const std::optional<DType> low = autocast_dtype(tensors.front()->device());
  if (!low) return std::nullopt;
  bool has_low = false, has_float32 = false;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (t->dtype() != DType::Float32 && t->dtype() != *low) return std::nullopt;
    has_low = has_low || t->dtype() == *low;
    has_float32 = has_float32 || t->dtype() == DType::Float32;
  }
  return has_low && has_float32 ? low : std::nullopt;
}

}  // namespace

std::pair<Tensor, Tensor> autocast_meet(const Tensor& a, const Tensor& b) {
  // Every binary op comes through here: the common case (one dtype) returns before any lookup.
  if (!a.defined() || !b.defined() || a.dtype() == b.dtype()) return {a, b};
  const std::optional<DType> low = mixed_low({&a, &b});
  if (!low) return {a, b};
  return {autocast_cast(a, *low), autocast_cast(b, *low)};
}

std::vector<Tensor> autocast_meet(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : tensors) ptrs.push_back(&t);
  const std::optional<DType> low = mixed_low(ptrs);
  if (!low) return tensors;
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(t.defined() ? autocast_cast(t, *low) : t);
  return out;
}

Tensor in_accumulate_dtype(const Tensor& t) {
  return t.defined() && is_half(t.dtype()) ? t.to(accumulate_dtype(t.dtype())) : t;
}

}  // namespace tessera
