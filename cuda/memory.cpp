// Device and pinned memory of the CUDA backend.
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/graph.h"
#include "tessera/cuda/per_device.h"

namespace tessera::cuda {

namespace {

// CUDA counts cudaMalloc and cudaMallocHost among the calls that may disturb a graph capture and
// refuses them in the capturing thread; allocating while capturing is safe here (an allocation
// queues no work, and the graph's blocks stay in its private pool), so they are made in relaxed
// mode for their duration, as PyTorch's allocator does.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// cudaMalloc/cudaFree of one device, whichever device is current when called.
class DeviceMemory final : public RawMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  void* allocate(size_t nbytes) override {
    DeviceGuard guard(Device::cuda(device_));
    RelaxedCaptureMode relaxed;
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky error the failed allocation left
      return nullptr;
    }
    check(status, "cudaMalloc");
    return p;
  }
  void free(void* ptr) override {
    DeviceGuard guard(Device::cuda(device_));
    check(cudaFree(ptr), "cudaFree");
  }
  std::string name() const override { return Device::cuda(device_).str(); }
  void memory_info(size_t& free_bytes, size_t& total_bytes) const override {
    DeviceGuard guard(Device::cuda(device_));
    free_bytes = total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
  }

 private:
  int device_;
};

#if defined(TESSERA_CUDA_EMU)
// In the emulator every block handed out is first filled with NaN bytes, cached or not, so a
// kernel that reads an output element it never wrote (or an input another kernel never wrote)
// produces NaN in the tests instead of a plausible stale value. The fill is queued on the device's
// stream, in the order the caching allocator reuses blocks in: work queued before the block was
// freed may not have run yet (TESSERA_EMU_ASYNC). While the stream captures, it is made at once,
// outside the graph, as the block is filed in the graph's pool.
class PoisoningAllocator final : public Allocator {
 public:
  PoisoningAllocator(std::unique_ptr<Allocator> inner, int device) : inner_(std::move(inner)), device_(device) {}
  void* allocate(size_t nbytes) override {
    void* p = inner_->allocate(nbytes);
    cudaStream_t stream = current_stream(device_);
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream, &capturing);
    if (capturing != cudaStreamCaptureStatusNone) stream = nullptr;
    if (nbytes) check(cudaMemsetAsync(p, 0xFF, nbytes, stream), "emulator: poisoning a new block");
    return p;
  }
  void deallocate(void* ptr, size_t nbytes) override { inner_->deallocate(ptr, nbytes); }
  AllocatorStats stats() const override { return inner_->stats(); }
  void reset_peak() override { inner_->reset_peak(); }
  void empty_cache() override { inner_->empty_cache(); }

 private:
  std::unique_ptr<Allocator> inner_;
  int device_;
};
#endif

struct PerDeviceMemory {
  std::unique_ptr<DeviceMemory> raw;
  CachingAllocator* caching = nullptr;  // allocator itself, or the allocator it wraps
  std::unique_ptr<Allocator> allocator;
};

PerDeviceMemory& memory_of(int device) {
  static auto* devices = new PerDevice<PerDeviceMemory>;
  return devices->get(device, [device] {
    auto d = std::make_unique<PerDeviceMemory>();
    d->raw = std::make_unique<DeviceMemory>(device);
    // Blocks are filed by stream, or while the device captures a graph, by the graph's pool.
    auto caching = std::make_unique<CachingAllocator>(*d->raw, [device] { return allocation_pool(device); });
    d->caching = caching.get();
#if defined(TESSERA_CUDA_EMU)
    d->allocator = std::make_unique<PoisoningAllocator>(std::move(caching), device);
#else
    d->allocator = std::move(caching);
#endif
    return d;
  });
}

// Page-locked host memory, cached: cudaMallocHost and cudaFreeHost synchronise the device, and a
// data loader allocates a batch per step. A freed block may still be the source of a copy queued
// on a device's stream, so at its release an event is recorded on every device stream, and the
// block is handed out again only once that event has completed (PyTorch's caching host allocator
// works the same way).
//
// While a graph is being captured no event may be queried, from any thread (CUDA refuses the query
// and invalidates the capture: seen on an H100, where a pinned allocation inside the trainer's
// capture made every --cuda-graph run train eagerly), and an event recorded on the capturing stream
// would stand for the graph's work, not for the copies queued before. So during a capture a block
// is always a fresh one, and a block released is set aside without events; it gets them, and goes
// back to the cache, at the first allocation or release after the capture.
class PinnedCache final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t size = CachingAllocator::size_class(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!capture_in_progress()) {
      settle_set_aside();
      for (auto it = free_.lower_bound(size); it != free_.end() && it->first == size; ++it) {
        if (!copies_done(it->second.events)) continue;
        void* p = it->second.ptr;
        release_events(it->second.events);
        free_.erase(it);
        in_use_.emplace(p, size);
        return p;
      }
    }
    void* p = nullptr;
    RelaxedCaptureMode relaxed;
    check(cudaMallocHost(&p, size), "cudaMallocHost");
    in_use_.emplace(p, size);
    return p;
  }
  void deallocate(void* ptr, size_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = in_use_.find(ptr);
    TS_CHECK(it != in_use_.end(), "pinned allocator: freeing a pointer it did not allocate (internal error)");
    if (capture_in_progress()) {
      set_aside_.emplace_back(it->second, ptr);
    } else {
      settle_set_aside();
      free_.emplace(it->second, Block{ptr, events_after_queued_copies()});
    }
    in_use_.erase(it);
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capture_in_progress()) return;
    settle_set_aside();
    for (auto it = free_.begin(); it != free_.end();) {
      if (!copies_done(it->second.events)) {
        ++it;
        continue;
      }
      release_events(it->second.events);
      check(cudaFreeHost(it->second.ptr), "cudaFreeHost");
      it = free_.erase(it);
    }
  }

 private:
  struct Block {
    void* ptr;
    std::vector<cudaEvent_t> events;
  };
  // One event per device, recorded on its stream after every copy queued so far.
  static std::vector<cudaEvent_t> events_after_queued_copies() {
    std::vector<cudaEvent_t> events;
    for (int d = 0; d < device_count(DeviceType::CUDA); ++d) {
      DeviceGuard guard(Device::cuda(d));
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      check(cudaEventRecord(e, current_stream(d)), "cudaEventRecord");
      events.push_back(e);
    }
    return events;
  }
  static bool copies_done(const std::vector<cudaEvent_t>& events) {
    for (cudaEvent_t e : events) {
      const cudaError_t status = cudaEventQuery(e);
      if (status == cudaErrorNotReady) {
        cudaGetLastError();  // "not ready" is an answer, not an error for the next launch to report
        return false;
      }
      check(status, "cudaEventQuery (pinned allocator)");
    }
    return true;
  }
  static void release_events(std::vector<cudaEvent_t>& events) {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    events.clear();
  }
  // The blocks released during a capture, into the cache now that none is under way.
  void settle_set_aside() {
    for (const auto& [size, ptr] : set_aside_) free_.emplace(size, Block{ptr, events_after_queued_copies()});
    set_aside_.clear();
  }
  std::mutex mutex_;
  std::multimap<size_t, Block> free_;
  std::unordered_map<void*, size_t> in_use_;
  std::vector<std::pair<size_t, void*>> set_aside_;  // (size, block) released during a capture
};

}  // namespace

Allocator& device_allocator(int device) { return *memory_of(device).allocator; }

CachingAllocator& caching_allocator(int device) { return *memory_of(device).caching; }

Allocator& pinned_allocator() {
  static auto* pinned = new PinnedCache;  // never destroyed, as the device allocators
  return *pinned;
}

Tensor empty_pinned(const Shape& shape, DType dtype) {
  return Tensor::empty(shape, dtype, Device::cpu(), pinned_allocator());
}

}  // namespace tessera::cuda
