#include "tessera/core/allocator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

#include "tessera/core/error.h"

namespace tessera {

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

size_t CachingAllocator::size_class(size_t nbytes) {
  constexpr size_t kGranule = 512, kSmall = 4096;
  if (nbytes < kSmall) return std::max<size_t>(kGranule, (nbytes + kGranule - 1) / kGranule * kGranule);
  const size_t step = std::bit_floor(nbytes) / 4;  // four classes per power of two
  return (nbytes + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(RawMemory& raw, std::function<uintptr_t()> current_stream, bool cache)
    : raw_(raw), current_stream_(std::move(current_stream)), cache_(cache) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
  // Blocks still in use belong to tensors that outlive the allocator (statics at exit); the
  // process is ending, so they are left to it.
}

void* CachingAllocator::allocate(size_t nbytes) {
  const size_t size = size_class(nbytes);
  const uintptr_t stream = current_stream_ ? current_stream_() : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  size_t block_size = size;
  auto& buckets = free_[stream];
  const auto fit = buckets.lower_bound(size);  // buckets are never empty (below)
  if (fit != buckets.end() && fit->first <= kMaxOversize * size) {
    ptr = fit->second.back();
    block_size = fit->first;
    fit->second.pop_back();
    if (fit->second.empty()) buckets.erase(fit);
    ++stats_.cache_hits;
  } else {
    ptr = raw_.allocate(size);
    if (!ptr) {  // the cache may hold the memory: give it back and try once more
      release_cached_locked();
      ptr = raw_.allocate(size);
    }
    if (!ptr) {
      size_t free_bytes = 0, total_bytes = 0;
      raw_.memory_info(free_bytes, total_bytes);
      throw Error(
          detail::concat(raw_.name(), " out of memory: tried to allocate ", format_bytes(static_cast<int64_t>(nbytes)),
                         "; ", format_bytes(static_cast<int64_t>(free_bytes)), " free of ",
                         format_bytes(static_cast<int64_t>(total_bytes)), ", ", format_bytes(stats_.reserved_bytes),
                         " reserved by Tessera (", format_bytes(stats_.allocated_bytes), " in tensors)"));
    }
    ++stats_.raw_allocations;
    stats_.reserved_bytes += static_cast<int64_t>(size);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  in_use_.emplace(ptr, Block{block_size, stream});
  stats_.allocated_bytes += static_cast<int64_t>(block_size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  TS_CHECK(it != in_use_.end(), raw_.name(), " allocator: freeing a pointer it did not allocate (internal error)");
  const Block block = it->second;
  in_use_.erase(it);
  stats_.allocated_bytes -= static_cast<int64_t>(block.size);
  if (cache_) free_[block.stream][block.size].push_back(ptr);
  else free_raw_locked(ptr, block.size);
}

void CachingAllocator::free_raw_locked(void* ptr, size_t size) {
  raw_.free(ptr);
  ++stats_.raw_frees;
  stats_.reserved_bytes -= static_cast<int64_t>(size);
}

void CachingAllocator::release_cached_locked() {
  for (auto it = free_.begin(); it != free_.end();) {
    if (held_pools_.count(it->first)) {
      ++it;
      continue;
    }
    for (auto& [size, blocks] : it->second)
      for (void* p : blocks) free_raw_locked(p, size);
    it = free_.erase(it);
  }
}

void CachingAllocator::hold_pool(uintptr_t pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  held_pools_.insert(pool);
}

void CachingAllocator::drop_pool(uintptr_t pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  held_pools_.erase(pool);
  const auto it = free_.find(pool);
  if (it == free_.end()) return;
  for (auto& [size, blocks] : it->second)
    for (void* p : blocks) free_raw_locked(p, size);
  free_.erase(it);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

}  // namespace tessera
