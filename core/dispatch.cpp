// The thread's KernelObserver; see core/dispatch.h.
#include "tessera/core/dispatch.h"

namespace tessera {

constinit thread_local KernelObserver* KernelObserver::current_ = nullptr;

namespace {
constinit thread_local LaunchCounts launches_on_this_thread;
}  // namespace

void count_device_launch(LaunchKind kind) noexcept {
  switch (kind) {
    case LaunchKind::Kernel: ++launches_on_this_thread.kernels; break;
    case LaunchKind::Library: ++launches_on_this_thread.library_calls; break;
    case LaunchKind::Memory: ++launches_on_this_thread.memory_ops; break;
  }
}
LaunchCounts device_launch_counts() noexcept { return launches_on_this_thread; }

KernelObserver* KernelObserver::install(KernelObserver* observer) {
  KernelObserver* previous = current_;
  current_ = observer;
  return previous;
}

}  // namespace tessera
