// Device memory allocation. Every Storage gets its bytes from an Allocator and remembers which one
// (a pinned host buffer and a plain host buffer are both "cpu" memory but must go back to different
// allocators). The CPU allocator is built in; a device backend supplies its own (core/backend.h).
//
// CachingAllocator serves both the CPU and the GPU. cudaMalloc/cudaFree synchronise the device and
// cost tens of microseconds, and on the CPU a fresh large buffer costs a page fault per 4 KiB page
// on first touch (a 10 MB activation: 2,400 faults), so a training step must not go to the raw
// memory once it has run once. It keeps freed blocks in free lists per (stream, size class) and
// hands them out again; it asks the raw memory for more only when no cached block fits, and on
// failure releases its cache and retries before reporting out-of-memory. It is written against a
// small RawMemory interface, so it is tested on the CPU (tests/test_allocator.cpp) with a raw memory
// of simulated capacity.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera {

struct AllocatorStats {
  int64_t allocated_bytes = 0;       // in blocks handed out (size-class rounded)
  int64_t peak_allocated_bytes = 0;  // since construction or reset_peak()
  int64_t reserved_bytes = 0;        // obtained from the raw memory: allocated + cached
  int64_t peak_reserved_bytes = 0;
  int64_t raw_allocations = 0;  // calls of the raw allocator (cudaMalloc)
  int64_t raw_frees = 0;
  int64_t cache_hits = 0;  // allocations served from a free list
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Never returns null for nbytes > 0; throws tessera::Error when the memory is exhausted.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual AllocatorStats stats() const { return {}; }
  virtual void reset_peak() {}
  virtual void empty_cache() {}  // returns cached, unused blocks to the raw memory
};

// The memory a caching allocator draws from: cudaMalloc/cudaFree/cudaMemGetInfo for a GPU.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual void* allocate(size_t nbytes) = 0;  // null when out of memory; throws on other errors
  virtual void free(void* ptr) = 0;
  // "cuda:0", for messages.
  virtual std::string name() const = 0;
  // Free and total bytes of the device, for the out-of-memory message.
  virtual void memory_info(size_t& free_bytes, size_t& total_bytes) const = 0;
};

class CachingAllocator final : public Allocator {
 public:
  // `current_stream` names the stream the caller's work is queued on; a freed block is reused only
  // by allocations on the stream it was allocated on (so no kernel still running on one stream
  // can see its memory handed to another). Null: one stream. With `cache` false every block goes
  // back to the raw memory when it is freed (the statistics stay): for AddressSanitizer, which
  // sees a reused block as valid memory, and for TESSERA_NO_MEMORY_CACHING=1.
  explicit CachingAllocator(RawMemory& raw, std::function<uintptr_t()> current_stream = nullptr, bool cache = true);
  ~CachingAllocator() override;

  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;

  // Bytes a request of `nbytes` occupies: 512-byte granules below 4 KiB, above that four classes
  // per power of two (2^k, 1.25·2^k, 1.5·2^k, 1.75·2^k), so at most 25% is wasted and a training
  // step's recurring shapes map to a few dozen classes.
  static size_t size_class(size_t nbytes);
  // A request takes the smallest cached block of its class or larger, up to this many times its
  // class: the forward and backward passes of a step free and request different sizes, and a
  // cache that reused only exact classes grew 7-8% larger (measured on XCiT-S12 and CoaT-Lite
  // Small training steps; any larger block: 11-17% larger, the slack held while in use).
  static constexpr size_t kMaxOversize = 2;

  // A private pool: the memory of a captured CUDA Graph (core/graph.h), whose replays write to the
  // addresses it was captured with. While the device captures, current_stream names the pool, so
  // the capture's blocks are reused only by that capture and the graph's replays; held, the pool's
  // free blocks are never released (not by empty_cache, not to retry an allocation). drop_pool
  // releases its cached blocks; those still in use are released once freed, by empty_cache.
  void hold_pool(uintptr_t pool);
  void drop_pool(uintptr_t pool);

 private:
  struct Block {
    size_t size;
    uintptr_t stream;
  };
  void free_raw_locked(void* ptr, size_t size);
  void release_cached_locked();

  RawMemory& raw_;
  std::function<uintptr_t()> current_stream_;
  const bool cache_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> in_use_;
  // Free blocks by stream, then by block size in order (for the smallest block that fits).
  std::unordered_map<uintptr_t, std::map<size_t, std::vector<void*>>> free_;
  std::set<uintptr_t> held_pools_;
  AllocatorStats stats_;
};

// "1.50 GiB", "12.0 MiB", "512 B": byte counts in messages.
std::string format_bytes(int64_t bytes);

}  // namespace tessera
