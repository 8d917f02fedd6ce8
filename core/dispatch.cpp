// The thread's KernelObserver; see core/dispatch.h.
#include "tessera/core/dispatch.h"

namespace tessera {

constinit thread_local KernelObserver* KernelObserver::current_ = nullptr;

namespace {
constinit thread_local int64_t launches_on_this_thread = 0;
}  // namespace

void count_device_launch() noexcept { ++launches_on_this_thread; }
int64_t device_launches() noexcept { return launches_on_this_thread; }

KernelObserver* KernelObserver::install(KernelObserver* observer) {
  KernelObserver* previous = current_;
  current_ = observer;
  return previous;
}

}  // namespace tessera
