// Per-shape caches of library algorithm choices (cuBLASLt's heuristic, cuDNN's ranking): asking
// the library costs tens of microseconds and builds descriptors each time, while a training step
// repeats the same few dozen shapes. A cache maps a call's description (shapes, strides, dtype,
// math mode, pointer alignment) to what the library chose and the descriptors it was chosen for.
// TESSERA_CUDA_ALGO_CACHE=0 turns every cache off (each call asks again), to measure the lever.
#pragma once
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tessera::cuda {

// False when the environment says TESSERA_CUDA_ALGO_CACHE=0 (read once).
inline bool algorithm_cache_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_CUDA_ALGO_CACHE");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

template <class Entry>
class AlgorithmCache {
 public:
  // The entry for `key`, made by make() (returning std::unique_ptr<Entry>) on first use. With the
  // caches off, `scratch` receives a fresh entry every call and is returned.
  template <class Make>
  Entry& get(const std::string& key, std::unique_ptr<Entry>& scratch, const Make& make) {
    if (!algorithm_cache_enabled()) {
      scratch = make();
      return *scratch;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Entry>& entry = entries_[key];
    if (!entry) entry = make();
    return *entry;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<Entry>> entries_;
};

}  // namespace tessera::cuda
