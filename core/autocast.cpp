#include "tessera/core/autocast.h"

#include <array>
#include <atomic>

#include "tessera/core/error.h"

namespace tessera {

namespace {
thread_local std::array<std::optional<DType>, kNumDeviceTypes> autocast_state{};
std::atomic<bool> tf32_allowed{false};
std::atomic<bool> deterministic_only{false};
std::atomic<AmpActivations> activations{AmpActivations::Low};
}  // namespace

AutocastGuard::AutocastGuard(DeviceType device, DType dtype) : device_(device) {
  TS_CHECK(device != DeviceType::CPU,
           "autocast: mixed precision (bfloat16/float16) runs on cuda only; on the CPU "
           "float32 is the fastest precision Tessera has");
  TS_CHECK(dtype == DType::BFloat16 || dtype == DType::Float16, "autocast: expected bfloat16 or float16, got ",
           dtype_name(dtype));
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

void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

void set_deterministic_algorithms(bool on) { deterministic_only = on; }
bool deterministic_algorithms() { return deterministic_only; }

}  // namespace tessera
