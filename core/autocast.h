// Mixed precision, as torch.autocast. Inside an AutocastGuard for a device type, matmul, linear
// and conv2d of float32 tensors on a device of that type compute in the guard's dtype (bfloat16
// or float16): their operands are rounded to it and the library accumulates in float32. What
// becomes of the result is the activation precision (`--amp-activations`):
//   - low (the default, as llm.c): the result stays in the low precision, and so does every
//     activation after it — norms, softmax, GELU, the fused and element-wise kernels read and write
//     bfloat16/float16 and compute in float32. Parameters stay float32 (master weights): an op
//     meeting a float32 parameter and a low-precision activation rounds the parameter (ops/
//     autocast_operands.h), or, for per-channel parameters of norms and fused kernels, reads it in
//     float32 (core/dtype.h accumulate_dtype). Losses compute in float32. Half the bytes of every
//     activation, and no cast around every GEMM.
//   - float32 (PyTorch's policy for these ops): the result is returned as float32, so every other
//     op keeps float32; each GEMM is wrapped in casts.
// Gradients flow back through the same roundings, so the backward GEMMs and convolutions run in
// the low precision too, and every parameter's gradient arrives in float32.
//
// On the CPU autocast is bfloat16 only: with the CPU's bfloat16 instructions (AVX-512 BF16: Intel
// Cooper Lake and later Xeons, AMD Zen 4 and 5; AMX) oneDNN's bfloat16 kernels do the GEMMs and
// convolutions and every other kernel reads and writes bfloat16 (ops/cpu/storage.h); without them
// the same results come from a portable path (core/cpu_features.h). float16 is refused on the
// CPU: few CPUs have float16 arithmetic (AVX512-FP16, AMX-FP16), and without it every value would
// be converted for nothing.
//
// TF32 (allow_tf32): float32 GEMMs and convolutions on a GPU may round their inputs to TF32
// (10-bit mantissa) inside the tensor cores: faster, less exact. Off by default (float32 results
// then stay within float32 rounding of the CPU's); `tessera train --tf32 on` turns it on.
#pragma once
#include <optional>
#include <string>

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
// For the front ends of matmul, linear and conv2d: the autocast dtype when autocast is on at a's
// device and the operands are float32 or that dtype, at least one of them float32 (two operands
// already in the low precision need no cast: the op runs in it as it is); else none.
std::optional<DType> autocast_for(const Tensor& a, const Tensor& b);

// The activation precision under autocast (above): process-wide, as TF32.
enum class AmpActivations { Low, Float32 };
void set_amp_activations(AmpActivations activations);
AmpActivations amp_activations();
const char* amp_activations_name(AmpActivations activations);
// A low-precision result of an autocast op as the activation precision wants it: kept, or cast to
// float32 (a recorded cast).
Tensor autocast_result(const Tensor& low);

// What a run computes in, for logs and records: "float32", or "bfloat16 autocast (activations low)"
// and the like.
std::string precision_name(std::optional<DType> amp);

void set_allow_tf32(bool allow);
bool allow_tf32();

// Deterministic algorithms (torch.use_deterministic_algorithms): a GPU library may choose
// algorithms that add with atomics (cuDNN's convolution gradients), faster but varying in the last
// bits run to run, unless this is on. Off by default, as in PyTorch; `--deterministic` turns it on.
// (Tessera's own kernels are deterministic either way.)
void set_deterministic_algorithms(bool on);
bool deterministic_algorithms();

}  // namespace tessera
