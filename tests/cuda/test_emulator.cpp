// Tests of the SIMT emulator itself (cuda/emu/): that it runs correct kernels correctly in every
// thread order, and that it catches the GPU bugs it exists to catch — a missing barrier, a
// divergent barrier, a warp collective with a missing lane, unwritten shared memory, a shared
// array too large, dynamic shared memory beyond 48 KiB without the kernel's opt-in, a bad launch
// shape, a host pointer passed as a device pointer.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "tessera/cuda/block_reduce.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/launch.h"
#include "tessera/ops/ops.h"

using namespace tessera;
namespace emu = tessera::cuda::emu;

namespace {

constexpr unsigned kThreads = 256;

// Tree reduction of 256 values per block in shared memory; with_barriers = false is the classic
// bug of a reduction without __syncthreads between its steps.
__global__ void block_sum(const float* x, float* out, bool with_barriers) {
  TS_SHARED(float, s, kThreads);
  const unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * kThreads + t];
  if (with_barriers) __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    if (with_barriers) __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

// Warp-level sum with shuffles, one result per warp.
__global__ void warp_sum(const float* x, float* out) {
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
}

__global__ void shuffle_after_odd_lanes_exit(float* out) {
  if (threadIdx.x % 2) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 2);
}

__global__ void divergent_barrier(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

// Threads that return before a barrier are no longer live: the others may pass it.
__global__ void early_exit_then_barrier(float* out) {
  TS_SHARED(float, s, 64);
  if (threadIdx.x >= 64) return;
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[63 - threadIdx.x];
}

__global__ void read_unwritten_shared(float* out) {
  TS_SHARED(float, s, 32);
  out[threadIdx.x] = s[threadIdx.x];
}

__global__ void too_much_shared(float* out) {
  TS_SHARED(float, s, 13 * 1024);  // 52 KiB
  s[threadIdx.x] = 0.0f;
  out[threadIdx.x] = s[threadIdx.x];
}

// Fills all n floats of the launch's dynamic shared memory, and one thread sums them.
__global__ void sum_dynamic_shared(float* out, int n) {
  TS_DYNAMIC_SHARED(float, s);
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) s[i] = 1.0f;
  __syncthreads();
  if (threadIdx.x != 0) return;
  float total = 0;
  for (int i = 0; i < n; ++i) total += s[i];
  out[0] = total;
}

// A static array beside the dynamic memory.
__global__ void static_beside_dynamic(float* out) {
  TS_SHARED(float, s, 256);
  TS_DYNAMIC_SHARED(float, d);
  s[threadIdx.x] = d[threadIdx.x] = 1.0f;
  out[threadIdx.x] = s[threadIdx.x] + d[threadIdx.x];
}

__global__ void count_with_atomics(unsigned long long* counter, float* sum) {
  atomicAdd(counter, 1ull);
  atomicAdd(sum, 0.5f);
}

__global__ void thread_coordinates(int* out) {
  const unsigned linear = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
  const unsigned block = blockIdx.x + blockIdx.y * gridDim.x;
  out[block * blockDim.x * blockDim.y * blockDim.z + linear] = static_cast<int>(block * 1000 + linear);
}

__global__ void votes(int* out) {
  const unsigned lane = threadIdx.x;
  out[0 + lane] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  out[32 + lane] = __any_sync(0xffffffffu, lane == 7);
  out[64 + lane] = __all_sync(0xffffffffu, lane < 31);
}

// Every thread writes the block's sum and maximum, as block_all_reduce (cuda/block_reduce.h) gives them.
__global__ void all_reduce_each_thread(const float* x, float* sums, float* maxes) {
  TS_SHARED(float, scratch, 32);
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float s = cuda::block_all_reduce(x[i], scratch, cuda::SumOp{}, 0.0f);
  const float m = cuda::block_all_reduce(x[i], scratch, cuda::MaxOp{}, -INFINITY);
  sums[i] = s;
  maxes[i] = m;
}

Tensor device_floats(const std::vector<float>& values) {
  return from_vector(values, {static_cast<int64_t>(values.size())}).to(Device::cuda());
}
Tensor device_zeros(int64_t n, DType dtype = DType::Float32) { return zeros({n}, dtype, Device::cuda()); }

// The reduction of blocks * 256 small integers (exact in float whatever the order of additions).
std::vector<float> run_block_sum(bool with_barriers, int blocks = 3) {
  std::vector<float> x(blocks * kThreads);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
  Tensor in = device_floats(x), out = device_zeros(blocks);
  cuda::launch("block_sum", block_sum, blocks, kThreads, 0, nullptr, in.device_data<float>(), out.device_data<float>(),
               with_barriers);
  return out.to_vector<float>();
}

std::vector<float> expected_block_sums(int blocks = 3) {
  std::vector<float> s(blocks, 0.0f);
  for (int b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < kThreads; ++t) s[b] += static_cast<float>((b * kThreads + t) % 7);
  return s;
}

// Restores the default order when a test ends.
struct OrderGuard {
  emu::ThreadOrder saved = emu::thread_order();
  ~OrderGuard() { emu::set_thread_order(saved); }
};

}  // namespace

TEST_CASE("emulator: a block reduction with its barriers is right in every thread order", "[emulator]") {
  OrderGuard guard;
  for (auto order : {emu::ThreadOrder::Forward, emu::ThreadOrder::Reverse, emu::ThreadOrder::Shuffled}) {
    emu::set_thread_order(order);
    CHECK(run_block_sum(true) == expected_block_sums());
  }
}

TEST_CASE("emulator: a reduction without its barriers fails", "[emulator]") {
  OrderGuard guard;
  // Forward order runs thread 0 to its end before thread 1 has written its value: it reads the
  // NaN the block's shared memory starts with. A shuffled order reads some unfinished partial sum.
  for (auto order : {emu::ThreadOrder::Forward, emu::ThreadOrder::Shuffled}) {
    emu::set_thread_order(order);
    const std::vector<float> got = run_block_sum(false), want = expected_block_sums();
    INFO("order " << static_cast<int>(order));
    for (size_t b = 0; b < want.size(); ++b) CHECK_FALSE(got[b] == want[b]);
  }
  // Reverse order happens to finish every thread that feeds thread t before t runs, so this bug
  // passes there: the reason the emulator cycles through all three orders.
  emu::set_thread_order(emu::ThreadOrder::Reverse);
  CHECK(run_block_sum(false) == expected_block_sums());
}

TEST_CASE("emulator: warp shuffles exchange values between lanes", "[emulator]") {
  std::vector<float> x(128);
  std::iota(x.begin(), x.end(), 0.0f);
  Tensor in = device_floats(x), out = device_zeros(4);
  cuda::launch("warp_sum", warp_sum, 1, 128, 0, nullptr, in.device_data<float>(), out.device_data<float>());
  const std::vector<float> got = out.to_vector<float>();
  for (int w = 0; w < 4; ++w) CHECK(got[w] == static_cast<float>(32 * 32 * w + 31 * 32 / 2));
}

TEST_CASE("emulator: a warp collective whose mask names an exited lane is an error", "[emulator]") {
  Tensor out = device_zeros(32);
  CHECK_THROWS_WITH(cuda::launch("shuffle_after_odd_lanes_exit", shuffle_after_odd_lanes_exit, 1, 32, 0, nullptr,
                                 out.device_data<float>()),
                    Catch::Contains("shuffle_after_odd_lanes_exit") && Catch::Contains("__shfl_down_sync") &&
                        Catch::Contains("lane 1 has exited"));
}

TEST_CASE("emulator: __syncthreads reached at two places is an error", "[emulator]") {
  Tensor out = device_zeros(64);
  CHECK_THROWS_WITH(cuda::launch("divergent_barrier", divergent_barrier, 1, 64, 0, nullptr, out.device_data<float>()),
                    Catch::Contains("divergent __syncthreads") && Catch::Contains("test_emulator.cpp"));
}

TEST_CASE("emulator: threads that have exited do not hold a barrier", "[emulator]") {
  Tensor out = device_zeros(64);
  cuda::launch("early_exit_then_barrier", early_exit_then_barrier, 1, 128, 0, nullptr, out.device_data<float>());
  const std::vector<float> got = out.to_vector<float>();
  for (int t = 0; t < 64; ++t) CHECK(got[t] == static_cast<float>(63 - t));
}

TEST_CASE("emulator: shared memory starts as NaN in every block", "[emulator]") {
  Tensor out = device_zeros(32);
  cuda::launch("read_unwritten_shared", read_unwritten_shared, 1, 32, 0, nullptr, out.device_data<float>());
  for (float v : out.to_vector<float>()) CHECK(std::isnan(v));
}

TEST_CASE("emulator: a block may not use more than 48 KiB of shared memory", "[emulator]") {
  Tensor out = device_zeros(32);
  CHECK_THROWS_WITH(cuda::launch("too_much_shared", too_much_shared, 1, 32, 0, nullptr, out.device_data<float>()),
                    Catch::Contains("too_much_shared") && Catch::Contains("exceed the 49152 bytes"));
}

// As on an sm_90 GPU: 48 KiB of dynamic shared memory for any kernel, up to 227 KiB for one given
// cudaFuncAttributeMaxDynamicSharedMemorySize on its device first (cuda::opt_in_shared_bytes).
TEST_CASE("emulator: beyond 48 KiB of dynamic shared memory only once the kernel opts in", "[emulator]") {
  Tensor out = device_zeros(256);
  auto run = [&](size_t bytes) {
    cuda::launch("sum_dynamic_shared", sum_dynamic_shared, 1, 256, bytes, nullptr, out.device_data<float>(),
                 static_cast<int>(bytes / sizeof(float)));
    return out.narrow(0, 0, 1).item();
  };
  CHECK(run(48 * 1024) == 12288);
  CHECK_THROWS_WITH(run(64 * 1024),
                    Catch::Contains("kernel 'sum_dynamic_shared'") &&
                        Catch::Contains("65536 bytes of dynamic shared memory; a block may use 49152") &&
                        Catch::Contains("cudaFuncAttributeMaxDynamicSharedMemorySize"));

  int per_block = 0, opt_in = 0;
  REQUIRE(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlock, 0) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&opt_in, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) == cudaSuccess);
  CHECK(per_block == 49152);
  CHECK(opt_in == 232448);
  const auto* kernel = reinterpret_cast<const void*>(&sum_dynamic_shared);
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, opt_in + 1) == cudaErrorInvalidValue);
  cudaGetLastError();
  REQUIRE(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) == cudaSuccess);
  CHECK(run(64 * 1024) == 16384);
  CHECK_THROWS_WITH(run(64 * 1024 + 4), Catch::Contains("sum_dynamic_shared") && Catch::Contains("opted in to 65536"));

  // The backend's helper raises the attribute to what a launch needs, up to the device's limit.
  cuda::opt_in_shared_bytes("sum_dynamic_shared", sum_dynamic_shared, static_cast<size_t>(opt_in));
  CHECK(run(static_cast<size_t>(opt_in)) == static_cast<float>(opt_in / 4));
  CHECK_THROWS_WITH(cuda::opt_in_shared_bytes("sum_dynamic_shared", sum_dynamic_shared, opt_in + 4),
                    Catch::Contains("sum_dynamic_shared: 232452 bytes") && Catch::Contains("at most 232448"));

  // Static arrays count against the limit beside the bytes the kernel opted in to.
  cuda::opt_in_shared_bytes("static_beside_dynamic", static_beside_dynamic, static_cast<size_t>(opt_in));
  CHECK_THROWS_WITH(cuda::launch("static_beside_dynamic", static_beside_dynamic, 1, 256, 64 * 1024, nullptr,
                                 out.device_data<float>()),
                    Catch::Contains("static_beside_dynamic") && Catch::Contains("exceed the 232448 bytes"));
}

TEST_CASE("emulator: atomics from every thread of every block", "[emulator]") {
  Tensor counter = zeros({1}, DType::Int64, Device::cuda()), sum = device_zeros(1);
  cuda::launch("count_with_atomics", count_with_atomics, 5, 96, 0, nullptr,
               reinterpret_cast<unsigned long long*>(counter.device_data<int64_t>()), sum.device_data<float>());
  CHECK(counter.item() == 480);
  CHECK(sum.item() == 240.0);
}

TEST_CASE("emulator: 3-d blocks and 2-d grids number their threads as CUDA does", "[emulator]") {
  const dim3 block(8, 4, 2), grid(3, 2);
  // int32 output through an int64 buffer of half the count: 6 blocks of 64 threads.
  Tensor buf = zeros({6 * 64 / 2}, DType::Int64, Device::cuda());
  cuda::launch("thread_coordinates", thread_coordinates, grid, block, 0, nullptr,
               reinterpret_cast<int*>(buf.device_data<int64_t>()));
  const std::vector<int64_t> packed = buf.to_vector<int64_t>();
  std::vector<int> got(6 * 64);
  std::memcpy(got.data(), packed.data(), got.size() * sizeof(int));
  for (int b = 0; b < 6; ++b)
    for (int t = 0; t < 64; ++t) CHECK(got[b * 64 + t] == b * 1000 + t);
}

TEST_CASE("emulator: warp votes", "[emulator]") {
  Tensor buf = zeros({48}, DType::Int64, Device::cuda());  // 96 ints
  cuda::launch("votes", votes, 1, 32, 0, nullptr, reinterpret_cast<int*>(buf.device_data<int64_t>()));
  const std::vector<int64_t> packed = buf.to_vector<int64_t>();
  std::vector<int> got(96);
  std::memcpy(got.data(), packed.data(), got.size() * sizeof(int));
  unsigned every_third = 0;
  for (int l = 0; l < 32; l += 3) every_third |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    CHECK(static_cast<unsigned>(got[l]) == every_third);
    CHECK(got[32 + l] == 1);
    CHECK(got[64 + l] == 0);
  }
}

TEST_CASE("emulator: invalid launch shapes are refused as the GPU would", "[emulator]") {
  Tensor out = device_zeros(32);
  CHECK_THROWS_WITH(
      cuda::launch("read_unwritten_shared", read_unwritten_shared, 1, 2048, 0, nullptr, out.device_data<float>()),
      Catch::Contains("2048 threads per block"));
  CHECK_THROWS_WITH(cuda::launch("read_unwritten_shared", read_unwritten_shared, dim3(1, 70000), 32, 0, nullptr,
                                 out.device_data<float>()),
                    Catch::Contains("grid dimensions"));
}

TEST_CASE("emulator: copies check that device pointers are device memory", "[emulator]") {
  float host_a[4] = {1, 2, 3, 4}, host_b[4] = {};
  CHECK(cudaMemcpy(host_b, host_a, sizeof host_a, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  Tensor d = device_zeros(4);
  CHECK(cudaMemcpy(d.device_data<float>(), host_a, sizeof host_a, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(host_b, d.device_data<float>(), sizeof host_b, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host_b[3] == 4.0f);
  // A range running past the end of the allocation is not device memory either.
  CHECK(cudaMemcpy(host_b, d.device_data<float>() + 1, 4096, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
}

TEST_CASE("emulator: a capturing stream records its work and enforces CUDA's rules of capture", "[emulator]") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  Tensor d = device_zeros(4);
  const auto begin = [&](cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal) {
    REQUIRE(cudaStreamBeginCapture(stream, mode) == cudaSuccess);
  };
  const auto end = [&] {
    cudaGraph_t graph = nullptr;
    const cudaError_t e = cudaStreamEndCapture(stream, &graph);
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    return e;
  };
  // Recorded, run at each launch of the graph.
  begin();
  CHECK(cudaMemsetAsync(d.device_data<float>(), 0x3F, 4, stream) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  CHECK(d.to(Device::cpu()).to_vector<float>()[0] == 0.0f);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);  // (the copy below is on the device's own stream)
  CHECK(d.to(Device::cpu()).to_vector<float>()[0] > 0.7f);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  // A synchronisation of the capturing stream fails and invalidates the capture.
  begin();
  CHECK(cudaStreamSynchronize(stream) == cudaErrorStreamCaptureUnsupported);
  CHECK(end() == cudaErrorStreamCaptureInvalidated);
  // So does an allocation, unless the thread's mode is relaxed.
  void* p = nullptr;
  begin();
  CHECK(cudaMalloc(&p, 256) == cudaErrorStreamCaptureUnsupported);
  CHECK(end() == cudaErrorStreamCaptureInvalidated);
  begin();
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  CHECK(cudaMalloc(&p, 256) == cudaSuccess);
  cudaThreadExchangeStreamCaptureMode(&mode);
  CHECK(end() == cudaSuccess);
  cudaFree(p);
  // A recorded copy may not read pageable host memory: a replay could not know it is still there.
  float host[1] = {1};
  begin();
  CHECK(cudaMemcpyAsync(d.device_data<float>(), host, sizeof host, cudaMemcpyHostToDevice, stream) ==
        cudaErrorStreamCaptureUnsupported);
  CHECK(end() == cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  cudaStreamDestroy(stream);
}

TEST_CASE("block_all_reduce gives every thread of the block the sum and the maximum", "[emulator]") {
  for (unsigned threads : {32u, 96u, 1024u}) {
    std::vector<float> x(2 * threads);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101);
    Tensor in = device_floats(x), sums = device_zeros(2 * threads), maxes = device_zeros(2 * threads);
    cuda::launch("all_reduce_each_thread", all_reduce_each_thread, 2, threads, 0, nullptr, in.device_data<float>(),
                 sums.device_data<float>(), maxes.device_data<float>());
    const std::vector<float> s = sums.to_vector<float>(), m = maxes.to_vector<float>();
    for (unsigned b = 0; b < 2; ++b) {
      float want_sum = 0, want_max = -INFINITY;
      for (unsigned t = 0; t < threads; ++t) {
        want_sum += x[b * threads + t];
        want_max = std::max(want_max, x[b * threads + t]);
      }
      for (unsigned t = 0; t < threads; ++t) {
        CHECK(s[b * threads + t] == want_sum);
        CHECK(m[b * threads + t] == want_max);
      }
    }
  }
}
