// The device seam. Each op family declares its kernel signature once and owns one KernelTable;
// the CPU kernel fills the CPU slot at compile time (constant initialisation, so no static-init
// order problems), and the CUDA backend fills the CUDA slot from cuda::register_kernels(). An op's
// front end (shape checks, autograd) calls `table[device](...)` and never names a backend, so
// adding a device kernel touches neither the op's callers nor its gradient.
#pragma once
#include <array>

#include "tessera/core/device.h"
#include "tessera/core/error.h"

namespace tessera {

template <class Fn>
class KernelTable {
 public:
  constexpr KernelTable(const char* op, Fn* cpu_kernel) : op_(op), kernels_{cpu_kernel, nullptr} {}

  void set(DeviceType type, Fn* kernel) { kernels_[static_cast<int>(type)] = kernel; }
  bool has(DeviceType type) const { return kernels_[static_cast<int>(type)] != nullptr; }

  Fn* operator[](Device device) const {
    Fn* k = kernels_[static_cast<int>(device.type)];
    TS_CHECK(k != nullptr, "op '", op_, "' has no kernel for device ", device.str());
    return k;
  }

 private:
  const char* op_;
  std::array<Fn*, kNumDeviceTypes> kernels_;
};

}  // namespace tessera
