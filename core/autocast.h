// Mixed precision, as torch.autocast. Inside an AutocastGuard for a device type, matmul, linear
// and conv2d of float32 tensors on a device of that type compute in the guard's dtype (bfloat16
// or float16): their operands are rounded to it, the library accumulates in float32, and the
// result is returned as float32, so every other op — norms, softmax, losses, the optimizer on
// float32 master weights — keeps float32. Gradients flow back through the same roundings, so the
// backward GEMMs and convolutions run in the low precision too (as PyTorch's autocast does).
//
// Mixed precision is a GPU feature (tensor cores); on the CPU a guard is refused with a clear
// error rather than running slower than float32 does there.
//
// TF32 (allow_tf32): float32 GEMMs and convolutions on a GPU may round their inputs to TF32
// (10-bit mantissa) inside the tensor cores: faster, less exact. Off by default (float32 results
// then stay within float32 rounding of the CPU's); `tessera train --tf32 on` turns it on.
#pragma once
#include <optional>

#include "tessera/core/tensor.h"

namespace tessera {

class AutocastGuard {
 public:
  AutocastGuard(DeviceType device, DType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_;
  std::optional<DType> previous_;
};

// The dtype matmul-like ops on `device` compute float32 operands in now, if autocast is on there.
std::optional<DType> autocast_dtype(Device device);
// For the front ends: the autocast dtype when both operands are float32 on a device where autocast
// is on, else none.
std::optional<DType> autocast_for(const Tensor& a, const Tensor& b);

void set_allow_tf32(bool allow);
bool allow_tf32();

// Deterministic algorithms (torch.use_deterministic_algorithms): a GPU library may choose
// algorithms that add with atomics (cuDNN's convolution gradients), faster but varying in the last
// bits run to run, unless this is on. Off by default, as in PyTorch; `--deterministic` turns it on.
// (Tessera's own kernels are deterministic either way.)
void set_deterministic_algorithms(bool on);
bool deterministic_algorithms();

}  // namespace tessera
