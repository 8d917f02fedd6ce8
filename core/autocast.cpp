#include "tessera/core/autocast.h"

#include <array>
#include <atomic>

#include "tessera/core/error.h"

namespace tessera {

namespace {
thread_local std::array<std::optional<DType>, kNumDeviceTypes> autocast_state{};
std::atomic<bool> tf32_allowed{false};
std::atomic<bool> deterministic_only{false};
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
  if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32) return std::nullopt;
  return autocast_dtype(a.device());
}

void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

void set_deterministic_algorithms(bool on) { deterministic_only = on; }
bool deterministic_algorithms() { return deterministic_only; }

}  // namespace tessera
