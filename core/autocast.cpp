#include "tessera/core/autocast.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "tessera/core/cpu_features.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {
thread_local std::array<std::optional<DType>, kNumDeviceTypes> autocast_state{};
// What the portable path costs against float32: training steps and inference of XCiT-nano and
// CoaT-Lite Tiny at batch 8, measured on Zen 5 with the instructions turned off (docs/benchmarks.md,
// "bfloat16 on the CPU").
constexpr const char* kPortableBf16Cost = "0.8-1.0x float32's speed with half its activation memory";
std::atomic<bool> tf32_allowed{false};
std::atomic<bool> deterministic_only{false};
std::atomic<AmpActivations> activations{AmpActivations::Low};
// bfloat16 on a CPU without bfloat16 instructions (or with them turned off) is correct but slower
// than float32 there: said once per process, on the first CPU guard.
void note_portable_bf16() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string why = cpu_features().avx512_bf16 || cpu_features().amx_bf16
                                ? std::string("TESSERA_CPU_BF16_NATIVE=0 turns this CPU's bfloat16 instructions off")
                                : "this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX): " + cpu_description();
    std::fprintf(stderr,
                 "tessera: %s. bfloat16 autocast on the CPU runs on the portable path: the same results at %s "
                 "(docs/benchmarks.md); without --amp, float32 is as fast or faster here.\n",
                 why.c_str(), kPortableBf16Cost);
  });
}

}  // namespace

AutocastGuard::AutocastGuard(DeviceType device, DType dtype) : device_(device) {
  TS_CHECK(dtype == DType::BFloat16 || dtype == DType::Float16, "autocast: expected bfloat16 or float16, got ",
           dtype_name(dtype));
  TS_CHECK(device != DeviceType::CPU || dtype == DType::BFloat16,
           "autocast: float16 runs on cuda only; on the CPU mixed precision is bfloat16 (--amp bf16), which CPUs "
           "with AVX-512 BF16 or AMX compute natively");
  if (device == DeviceType::CPU && !cpu_bf16_native()) note_portable_bf16();
  previous_ = autocast_state[static_cast<int>(device)];
  autocast_state[static_cast<int>(device)] = dtype;
}

AutocastGuard::~AutocastGuard() { autocast_state[static_cast<int>(device_)] = previous_; }

std::optional<DType> autocast_dtype(Device device) { return autocast_state[static_cast<int>(device.type)]; }

std::optional<DType> autocast_for(const Tensor& a, const Tensor& b) {
  const std::optional<DType> low = autocast_dtype(a.device());
  if (!low) return std::nullopt;
  const auto fits = [&](DType d) { return d == DType::Float32 || d == *low; };
  if (!fits(a.dtype()) || !fits(b.dtype())) return std::nullopt;
  if (a.dtype() == *low && b.dtype() == *low) return std::nullopt;
  return low;
}

void set_amp_activations(AmpActivations a) { activations = a; }
AmpActivations amp_activations() { return activations; }
const char* amp_activations_name(AmpActivations a) { return a == AmpActivations::Low ? "low" : "float32"; }

Tensor autocast_result(const Tensor& low) {
  return amp_activations() == AmpActivations::Low ? low : low.to(DType::Float32);
}

std::string precision_name(std::optional<DType> amp) {
  if (!amp) return "float32";
  return std::string(dtype_name(*amp)) + " autocast (activations " + amp_activations_name(amp_activations()) + ")";
}

void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

void set_deterministic_algorithms(bool on) { deterministic_only = on; }
bool deterministic_algorithms() { return deterministic_only; }

}  // namespace tessera
