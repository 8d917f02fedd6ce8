// The caching allocator (core/allocator.h), on a raw memory of simulated capacity: size classes,
// the smallest cached block that fits, reuse per stream, statistics, releasing the cache before
// failing, the out-of-memory message, caching turned off; and the CPU's own allocator.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <set>

#include "tessera/core/allocator.h"
#include "tessera/core/backend.h"
#include "tessera/core/error.h"
#include "tessera/core/storage.h"

using namespace tessera;

namespace {

// Host memory with a capacity, counting its calls.
class FakeMemory final : public RawMemory {
 public:
  explicit FakeMemory(size_t capacity) : capacity_(capacity) {}
  ~FakeMemory() override { CHECK(live_.empty()); }
  void* allocate(size_t nbytes) override {
    ++allocations;
    if (used_ + nbytes > capacity_) return nullptr;
    void* p = std::malloc(nbytes);
    live_[p] = nbytes;
    used_ += nbytes;
    return p;
  }
  void free(void* ptr) override {
    ++frees;
    auto it = live_.find(ptr);
    REQUIRE(it != live_.end());
    used_ -= it->second;
    live_.erase(it);
    std::free(ptr);
  }
  std::string name() const override { return "fake:0"; }
  void memory_info(size_t& free_bytes, size_t& total_bytes) const override {
    free_bytes = capacity_ - used_;
    total_bytes = capacity_;
  }
  int allocations = 0, frees = 0;

 private:
  size_t capacity_, used_ = 0;
  std::map<void*, size_t> live_;
};

}  // namespace

TEST_CASE("size classes: 512-byte granules, then four classes per power of two", "[allocator]") {
  CHECK(CachingAllocator::size_class(0) == 512);
  CHECK(CachingAllocator::size_class(1) == 512);
  CHECK(CachingAllocator::size_class(513) == 1024);
  CHECK(CachingAllocator::size_class(4095) == 4096);
  CHECK(CachingAllocator::size_class(4096) == 4096);
  CHECK(CachingAllocator::size_class(4097) == 5120);
  CHECK(CachingAllocator::size_class(1 << 20) == 1 << 20);
  CHECK(CachingAllocator::size_class((1 << 20) + 1) == (1 << 20) + (1 << 18));
  CHECK(CachingAllocator::size_class(7 << 20) == 7 << 20);
  for (size_t n : {4097u, 100000u, 3000000u, 123456789u}) {
    const size_t c = CachingAllocator::size_class(n);
    CHECK(c >= n);
    CHECK(c - n <= n / 4);  // at most 25% waste
  }
}

TEST_CASE("a repeated sequence of allocations is served from the cache", "[allocator]") {
  FakeMemory raw(1 << 30);
  CachingAllocator a(raw);
  auto step = [&] {
    void* x = a.allocate(1000);
    void* y = a.allocate(70000);
    void* z = a.allocate(1000);
    a.deallocate(y, 70000);
    void* w = a.allocate(75000);  // the same size class as y: reuses its block
    a.deallocate(x, 1000);
    a.deallocate(z, 1000);
    a.deallocate(w, 75000);
  };
  step();
  const int raw_after_first = raw.allocations;
  CHECK(raw_after_first == 3);  // x, y, z; w took y's block
  for (int i = 0; i < 10; ++i) step();
  CHECK(raw.allocations == raw_after_first);
  const AllocatorStats s = a.stats();
  CHECK(s.allocated_bytes == 0);
  const auto held = static_cast<int64_t>(2 * 1024 + CachingAllocator::size_class(70000));
  CHECK(s.reserved_bytes == held);
  CHECK(s.peak_allocated_bytes == held);
  CHECK(s.raw_allocations == 3);
  CHECK(s.cache_hits == 41);
  a.empty_cache();
  CHECK(a.stats().reserved_bytes == 0);
  CHECK(raw.frees == 3);
}

TEST_CASE("a request takes the smallest cached block of its class or larger, up to twice its class", "[allocator]") {
  FakeMemory raw(1 << 30);
  CachingAllocator a(raw);
  void* big = a.allocate(300000);    // class 327680
  void* mid = a.allocate(200000);    // class 229376
  void* small = a.allocate(100000);  // class 114688
  a.deallocate(big, 300000);
  a.deallocate(mid, 200000);
  a.deallocate(small, 100000);
  // 150000 (class 163840) fits in mid's and big's blocks: it takes the smaller one, mid's.
  void* p = a.allocate(150000);
  CHECK(p == mid);
  CHECK(a.stats().allocated_bytes == 229376);  // the block's size is what is held
  // 40000 (class 40960): small's block is more than twice that, so a new block is made.
  void* q = a.allocate(40000);
  CHECK(q != small);
  CHECK(raw.allocations == 4);
  a.deallocate(p, 150000);
  a.deallocate(q, 40000);
  CHECK(a.stats().allocated_bytes == 0);
  a.empty_cache();
  CHECK(raw.frees == 4);
}

TEST_CASE("with caching off every freed block goes back to the raw memory", "[allocator]") {
  FakeMemory raw(1 << 30);
  CachingAllocator a(raw, nullptr, /*cache=*/false);
  for (int i = 0; i < 3; ++i) a.deallocate(a.allocate(70000), 70000);
  CHECK(raw.allocations == 3);
  CHECK(raw.frees == 3);
  const AllocatorStats s = a.stats();
  CHECK(s.reserved_bytes == 0);
  CHECK(s.peak_reserved_bytes == static_cast<int64_t>(CachingAllocator::size_class(70000)));
  CHECK(s.cache_hits == 0);
}

TEST_CASE("host memory is cached: a step's buffers come back without new pages", "[allocator]") {
  const Device cpu = Device::cpu();
  empty_cache(cpu);
  const AllocatorStats before = allocator_stats(cpu);
  { Storage s(3 << 20, cpu); }
  { Storage s(3 << 20, cpu); }  // the same block again
  const AllocatorStats after = allocator_stats(cpu);
#ifdef __SANITIZE_ADDRESS__  // AddressSanitizer builds do not cache (core/storage.cpp)
  CHECK(after.raw_allocations - before.raw_allocations == 2);
  CHECK(after.reserved_bytes == before.reserved_bytes);
#else
  CHECK(after.raw_allocations - before.raw_allocations == 1);
  CHECK(after.cache_hits - before.cache_hits == 1);
  CHECK(after.reserved_bytes - before.reserved_bytes == static_cast<int64_t>(CachingAllocator::size_class(3 << 20)));
  empty_cache(cpu);
  CHECK(allocator_stats(cpu).reserved_bytes == after.allocated_bytes);
#endif
}

TEST_CASE("blocks are reused only on the stream they were allocated on", "[allocator]") {
  FakeMemory raw(1 << 30);
  uintptr_t stream = 1;
  CachingAllocator a(raw, [&] { return stream; });
  void* p = a.allocate(2048);
  a.deallocate(p, 2048);
  stream = 2;
  void* q = a.allocate(2048);  // stream 1's free block must not be handed to stream 2
  CHECK(q != p);
  CHECK(raw.allocations == 2);
  stream = 1;
  void* r = a.allocate(2048);
  CHECK(r == p);
  a.deallocate(q, 2048);
  a.deallocate(r, 2048);
}

TEST_CASE("the cache is released before an allocation is refused", "[allocator]") {
  FakeMemory raw(1 << 20);
  CachingAllocator a(raw);
  void* p = a.allocate(600 << 10);
  a.deallocate(p, 600 << 10);       // cached: the raw memory is still 600 KiB short
  void* q = a.allocate(700 << 10);  // does not fit beside the cached block: the cache is released
  CHECK(q != nullptr);
  CHECK(raw.frees == 1);
  a.deallocate(q, 700 << 10);
}

TEST_CASE("out of memory names the device, the request, free and reserved bytes", "[allocator]") {
  FakeMemory raw(4 << 20);
  CachingAllocator a(raw);
  void* held = a.allocate(3 << 20);
  CHECK_THROWS_WITH(a.allocate(2 << 20), Catch::Contains("fake:0 out of memory: tried to allocate 2.00 MiB") &&
                                             Catch::Contains("1.00 MiB free of 4.00 MiB") &&
                                             Catch::Contains("3.00 MiB reserved by Tessera (3.00 MiB in tensors)"));
  a.deallocate(held, 3 << 20);
  CHECK(a.stats().allocated_bytes == 0);
}

#if !defined(TESSERA_CUDA) && !defined(TESSERA_CUDA_EMU)  // with a backend, tests/cuda/ covers devices
TEST_CASE("a device that is not built in is refused with the reason", "[allocator]") {
  CHECK(find_backend(DeviceType::CUDA) == nullptr);
  CHECK_FALSE(is_available(Device::cuda()));
  CHECK_THROWS_WITH(allocator_for(Device::cuda()),
                    Catch::Contains("cuda:0 is not available") && Catch::Contains("-DTESSERA_CUDA=ON"));
}
#endif
