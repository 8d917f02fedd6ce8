// The device seam. Each op family declares its kernel signature once and owns one KernelTable;
// the CPU kernel fills the CPU slot at compile time (constant initialisation, so no static-init
// order problems), and the CUDA backend fills the CUDA slot from cuda::register_kernels(). An op's
// front end (shape checks, autograd) calls `table[device](...)` and never names a backend, so
// adding a device kernel touches neither the op's callers nor its gradient.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

#include "tessera/core/device.h"
#include "tessera/core/error.h"

namespace tessera {

// What a device backend queues on a stream, one count per item, on the calling thread: one of our
// kernels (cuda/launch.h), one library call (each cublasLtMatmul of a GEMM plan, each cuDNN call),
// or one memory operation (a memcpy or memset). Each is one node of a CUDA Graph that captures it,
// so the counts are what a GPU runs, whatever the emulator does with them: the profiler's launch
// columns (autograd/profiler.h). CPU kernels queue nothing.
enum class LaunchKind : uint8_t { Kernel, Library, Memory };
void count_device_launch(LaunchKind kind = LaunchKind::Kernel) noexcept;

struct LaunchCounts {
  int64_t kernels = 0, library_calls = 0, memory_ops = 0;
  int64_t total() const { return kernels + library_calls + memory_ops; }
  LaunchCounts operator-(const LaunchCounts& o) const {
    return {kernels - o.kernels, library_calls - o.library_calls, memory_ops - o.memory_ops};
  }
  LaunchCounts& operator+=(const LaunchCounts& o) {
    kernels += o.kernels;
    library_calls += o.library_calls;
    memory_ops += o.memory_ops;
    return *this;
  }
};
// Everything this thread has queued on devices so far.
LaunchCounts device_launch_counts() noexcept;
inline int64_t device_launches() noexcept { return device_launch_counts().total(); }

// The bytes a kernel call's tensor operands span (inputs and outputs alike, each counted once as
// if read or written once: a model of its memory traffic, not a measurement) and the narrowest
// element among them (2: a half-precision kernel, whose GEMMs run at the half-precision peak).
struct OperandTraffic {
  int64_t bytes = 0;
  int64_t narrowest_element = 0;  // bytes; 0 when the call has no tensor operand

  template <class T>
  void add(const T& operand) {
    if constexpr (requires { operand.defined(), operand.numel(), operand.element_size(); }) {
      if (!operand.defined()) return;
      const auto element = static_cast<int64_t>(operand.element_size());
      bytes += operand.numel() * element;
      if (narrowest_element == 0 || element < narrowest_element) narrowest_element = element;
    } else if constexpr (requires { operand.begin(), operand.end(), (*operand.begin()).numel(); }) {
      for (const auto& item : operand) add(item);
    }
  }
};

// Watches every kernel call on one thread (autograd/profiler.h times them). Installed per thread, so a
// profiled training step does not see the data loader's threads; with none installed a kernel call
// costs one thread-local load and a branch more than a plain function call.
class KernelObserver {
 public:
  virtual ~KernelObserver() = default;
  virtual void kernel_begin(const char* op, Device device) = 0;
  // Also when the kernel threw; must not throw itself.
  virtual void kernel_end(const char* op, Device device) noexcept = 0;
  // Called between kernel_begin and the kernel when wants_operands() says so.
  virtual bool wants_operands() const { return false; }
  virtual void kernel_operands(const OperandTraffic& traffic) noexcept { (void)traffic; }

  static KernelObserver* current() { return current_; }
  // Installs `observer` (nullptr: none) on this thread and returns the previous one.
  static KernelObserver* install(KernelObserver* observer);

 private:
  // constinit: no thread-local initialisation wrapper, so current() inlines to a plain load.
  static constinit thread_local KernelObserver* current_;
};

// What `table[device]` returns: the kernel, callable like it (with its own parameter types, so
// braced arguments still convert), reporting the call to the thread's KernelObserver if any.
template <class Fn>
class KernelCall;

template <class R, class... Params>
class KernelCall<R(Params...)> {
 public:
  KernelCall(const char* op, Device device, R (*kernel)(Params...)) : op_(op), device_(device), kernel_(kernel) {}

  R operator()(Params... args) const {
    KernelObserver* observer = KernelObserver::current();
    if (observer == nullptr) return kernel_(std::forward<Params>(args)...);
    observer->kernel_begin(op_, device_);
    if (observer->wants_operands()) {
      OperandTraffic traffic;
      (traffic.add(args), ...);
      observer->kernel_operands(traffic);
    }
    struct End {
      KernelObserver* observer;
      const char* op;
      Device device;
      ~End() { observer->kernel_end(op, device); }
    } end{observer, op_, device_};
    return kernel_(std::forward<Params>(args)...);
  }

 private:
  const char* op_;
  Device device_;
  R (*kernel_)(Params...);
};

template <class Fn>
class KernelTable {
 public:
  constexpr KernelTable(const char* op, Fn* cpu_kernel) : op_(op), kernels_{cpu_kernel, nullptr} {}

  void set(DeviceType type, Fn* kernel) { kernels_[static_cast<int>(type)] = kernel; }
  bool has(DeviceType type) const { return kernels_[static_cast<int>(type)] != nullptr; }

  KernelCall<Fn> operator[](Device device) const {
    Fn* k = kernels_[static_cast<int>(device.type)];
    TS_CHECK(k != nullptr, "op '", op_, "' has no kernel for device ", device.str());
    return KernelCall<Fn>(op_, device, k);
  }

 private:
  const char* op_;
  std::array<Fn*, kNumDeviceTypes> kernels_;
};

}  // namespace tessera
