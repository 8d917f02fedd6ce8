// The thread's KernelObserver; see core/dispatch.h.
#include "tessera/core/dispatch.h"

namespace tessera {

constinit thread_local KernelObserver* KernelObserver::current_ = nullptr;

KernelObserver* KernelObserver::install(KernelObserver* observer) {
  KernelObserver* previous = current_;
  current_ = observer;
  return previous;
}

}  // namespace tessera
