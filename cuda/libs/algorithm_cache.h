// Per-shape caches of library algorithm choices (cuBLASLt's heuristic, cuDNN's ranking): asking
// the library costs tens of microseconds and builds descriptors each time, while a training step
// repeats the same few dozen shapes. A cache maps a call's description (shapes, strides, dtype,
// math mode, pointer alignment) to what the library chose and the descriptors it was chosen for.
// TESSERA_CUDA_ALGO_CACHE=0 turns every cache off (each call asks again), to measure the lever
// (core/levers.h).
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tessera/core/levers.h"

namespace tessera::cuda {

// Combines the fields of a cache key into one hash (boost's hash_combine constant).
inline size_t hash_fields(std::initializer_list<int64_t> fields) {
  size_t h = 0;
  for (int64_t v : fields) h ^= std::hash<int64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// Key: a struct with operator== and a hash() member (the fields that decide the choice), so a
// lookup costs a few comparisons rather than formatting a string on every call.
template <class Key, class Entry>
class AlgorithmCache {
 public:
  // The entry for `key`, made by make() (returning std::unique_ptr<Entry>) on first use. With the
  // caches off, `scratch` receives a fresh entry every call and is returned.
  template <class Make>
  Entry& get(const Key& key, std::unique_ptr<Entry>& scratch, const Make& make) {
    if (!levers().algorithm_cache) {
      scratch = make();
      return *scratch;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Entry>& entry = entries_[key];
    if (!entry) entry = make();
    return *entry;
  }

 private:
  struct Hash {
    size_t operator()(const Key& k) const { return k.hash(); }
  };
  std::mutex mutex_;
  std::unordered_map<Key, std::unique_ptr<Entry>, Hash> entries_;
};

}  // namespace tessera::cuda
