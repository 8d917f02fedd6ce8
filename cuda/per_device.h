// Process-lifetime state of each device, made on first use: its stream, allocator, library handles.
// The holder is never destroyed (create it with `new` and keep the pointer in a static): tensors
// freed by static destructors and work still queued at exit may use the state until the process
// ends, and a pointer held in a static keeps it reachable, so leak checkers stay quiet.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

namespace tessera::cuda {

template <class T>
class PerDevice {
 public:
  // The object of `device`, made by make() (returning std::unique_ptr<T>) the first time.
  template <class Make>
  T& get(int device, const Make& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_cast<int>(items_.size()) <= device) items_.resize(static_cast<size_t>(device) + 1);
    std::unique_ptr<T>& item = items_[static_cast<size_t>(device)];
    if (!item) item = make();
    return *item;
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<T>> items_;
};

}  // namespace tessera::cuda
