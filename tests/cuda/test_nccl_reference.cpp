// Tests of the emulator's NCCL (cuda/libs/nccl_reference.cpp) between two processes: rank 1 is a
// child of the test (fork), rank 0 the test itself. The collectives by NCCL's contract (types,
// operations, in place), their place in stream order (one node, after the events the stream
// waits for, not ready while a peer is late), capture (one graph node, run at each replay), and
// the faults: a peer that never comes (ncclCommAbort ends the wait) and mismatched calls.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/cuda/emu/include/nccl.h"

namespace emu = tessera::cuda::emu;

namespace {

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

void nccl_ok(ncclResult_t r, const char* what) {
  expect(r == ncclSuccess, std::string(what) + ": " + ncclGetErrorString(r));
}

void cuda_ok(cudaError_t r, const char* what) {
  expect(r == cudaSuccess, std::string(what) + ": " + cudaGetErrorString(r));
}

// Runs body(rank, comm) as rank 0 here and rank 1 in a child process, then destroys the
// communicator unless body has aborted it (and set it to null); the child's failure
// (an exception's message on stderr, exit code 1) fails the test.
void two_ranks(const std::function<void(int, ncclComm_t&)>& body) {
  ncclUniqueId id;
  nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 0;
    try {
      ncclComm_t comm = nullptr;
      nccl_ok(ncclCommInitRank(&comm, 2, id, 1), "ncclCommInitRank (rank 1)");
      body(1, comm);
      if (comm) ncclCommDestroy(comm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank 1: %s\n", e.what());
      status = 1;
    }
    std::fflush(stderr);
    _exit(status);
  }
  std::string failure;
  try {
    ncclComm_t comm = nullptr;
    nccl_ok(ncclCommInitRank(&comm, 2, id, 0), "ncclCommInitRank (rank 0)");
    body(0, comm);
    if (comm) ncclCommDestroy(comm);
  } catch (const std::exception& e) { failure = e.what(); }
  int status = 0;
  waitpid(child, &status, 0);
  INFO("rank 0: " << failure);
  CHECK(failure.empty());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

template <class T>
T* device_array(const std::vector<T>& host) {
  void* p = nullptr;
  cuda_ok(cudaMalloc(&p, host.size() * sizeof(T)), "cudaMalloc");
  cuda_ok(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> host_array(const T* p, size_t n) {
  std::vector<T> host(n);
  cuda_ok(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return host;
}

struct Streams {
  cudaStream_t compute = nullptr, comm = nullptr;
  Streams() {
    cuda_ok(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_ok(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~Streams() {
    cudaStreamDestroy(comm);
    cudaStreamDestroy(compute);
  }
};

}  // namespace

TEST_CASE("nccl reference: allreduce, broadcast, allgather and reduce-scatter by NCCL's contract", "[cuda][nccl]") {
  two_ranks([](int rank, ncclComm_t& comm) {
    Streams s;
    // Larger than one round (1 MiB per rank): the rounds must join up.
    const size_t n = (size_t{1} << 18) + 37;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i % 101) * (rank + 1)) * 0.25f;
    float* d = device_array(x);
    nccl_ok(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm, s.comm), "in-place sum");
    cuda_ok(cudaStreamSynchronize(s.comm), "sync");
    auto got = host_array(d, n);
    for (size_t i = 0; i < n; i += 997) expect(got[i] == static_cast<float>(i % 101) * 0.75f, "sum of float32");
    float* avg = device_array(std::vector<float>(n, 0.f));
    float* src = device_array(x);
    nccl_ok(ncclAllReduce(src, avg, n, ncclFloat32, ncclAvg, comm, s.comm), "average");
    nccl_ok(ncclAllReduce(src, src, n, ncclFloat32, ncclMax, comm, s.comm), "max");
    cuda_ok(cudaStreamSynchronize(s.comm), "sync");
    got = host_array(avg, n);
    for (size_t i = 0; i < n; i += 997) expect(got[i] == static_cast<float>(i % 101) * 0.375f, "average of float32");
    got = host_array(src, n);
    for (size_t i = 0; i < n; i += 997) expect(got[i] == static_cast<float>(i % 101) * 0.5f, "max of float32");

    // bfloat16 and float16 are added in float32 and rounded back; int64 exactly.
    std::vector<tessera::BFloat16> b = {tessera::BFloat16(1.0f + static_cast<float>(rank)), tessera::BFloat16(256.0f),
                                        tessera::BFloat16(rank == 0 ? 1.0f : 0.0f)};
    auto* db = device_array(b);
    nccl_ok(ncclAllReduce(db, db, b.size(), ncclBfloat16, ncclSum, comm, s.comm), "bf16 sum");
    std::vector<tessera::Float16> h = {tessera::Float16(0.5f * static_cast<float>(rank + 1))};
    auto* dh = device_array(h);
    nccl_ok(ncclAllReduce(dh, dh, 1, ncclFloat16, ncclSum, comm, s.comm), "fp16 sum");
    std::vector<int64_t> k = {int64_t{1} << 40, rank + 1};
    auto* dk = device_array(k);
    nccl_ok(ncclAllReduce(dk, dk, 2, ncclInt64, ncclSum, comm, s.comm), "int64 sum");
    cuda_ok(cudaStreamSynchronize(s.comm), "sync");
    const auto bb = host_array(db, 3);
    expect(
        static_cast<float>(bb[0]) == 3.0f && static_cast<float>(bb[1]) == 512.0f && static_cast<float>(bb[2]) == 1.0f,
        "bf16 sum");
    expect(static_cast<float>(host_array(dh, 1)[0]) == 1.5f, "fp16 sum");
    const auto kk = host_array(dk, 2);
    expect(kk[0] == (int64_t{1} << 41) && kk[1] == 3, "int64 sum");

    // Broadcast from rank 1, in place.
    std::vector<double> v = {rank == 1 ? 7.5 : -1.0, rank == 1 ? 2.25 : -1.0};
    double* dv = device_array(v);
    nccl_ok(ncclBroadcast(dv, dv, 2, ncclFloat64, 1, comm, s.comm), "broadcast");
    // Allgather: rank r's 3 values land at 3r.
    std::vector<int32_t> mine = {10 * rank, 10 * rank + 1, 10 * rank + 2};
    int32_t* dm = device_array(mine);
    int32_t* all = device_array(std::vector<int32_t>(6, -1));
    nccl_ok(ncclAllGather(dm, all, 3, ncclInt32, comm, s.comm), "allgather");
    // Reduce-scatter: 4 values per rank summed, rank r keeps elements 2r, 2r+1.
    std::vector<float> rs = {1.f + rank, 2.f + rank, 3.f + rank, 4.f + rank};
    float* drs = device_array(rs);
    float* part = device_array(std::vector<float>(2, 0.f));
    nccl_ok(ncclReduceScatter(drs, part, 2, ncclFloat32, ncclSum, comm, s.comm), "reduce-scatter");
    cuda_ok(cudaStreamSynchronize(s.comm), "sync");
    const auto vv = host_array(dv, 2);
    expect(vv[0] == 7.5 && vv[1] == 2.25, "broadcast from rank 1");
    expect(host_array(all, 6) == std::vector<int32_t>({0, 1, 2, 10, 11, 12}), "allgather in rank order");
    const auto pp = host_array(part, 2);
    expect(pp[0] == static_cast<float>(2 * (2 * rank + 1) + 1) && pp[1] == static_cast<float>(2 * (2 * rank + 2) + 1),
           "reduce-scatter keeps this rank's block");
    for (void* p : {static_cast<void*>(d), static_cast<void*>(avg), static_cast<void*>(src), static_cast<void*>(db),
                    static_cast<void*>(dh), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dm),
                    static_cast<void*>(all), static_cast<void*>(drs), static_cast<void*>(part)})
      cudaFree(p);
  });
}

TEST_CASE("nccl reference: a collective is one stream node, not ready while a peer is late", "[cuda][nccl]") {
  two_ranks([](int rank, ncclComm_t& comm) {
    Streams s;
    float* d = device_array(std::vector<float>{1.0f});
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cudaEvent_t done;
    cuda_ok(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
    emu::trace_start();
    nccl_ok(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, comm, s.comm), "allreduce");
    cuda_ok(cudaEventRecord(done, s.comm), "record");
    if (rank == 0) expect(cudaEventQuery(done) == cudaErrorNotReady, "the event is not ready while rank 1 is late");
    while (cudaEventQuery(done) == cudaErrorNotReady) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto trace = emu::trace_stop();
    int nodes = 0;
    for (const auto& r : trace) nodes += r.label == "ncclAllReduce";
    expect(nodes == 1, "one node for the collective, got " + std::to_string(nodes));
    expect(host_array(d, 1)[0] == 2.0f, "sum");
    cudaEventDestroy(done);
    cudaFree(d);
  });
}

TEST_CASE("nccl reference: a captured collective is one graph node and runs at each replay", "[cuda][nccl]") {
  two_ranks([](int rank, ncclComm_t& comm) {
    Streams s;
    float* d = device_array(std::vector<float>{1.0f});
    cuda_ok(cudaStreamBeginCapture(s.comm, cudaStreamCaptureModeGlobal), "begin capture");
    nccl_ok(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, comm, s.comm), "allreduce");
    cudaGraph_t graph;
    cuda_ok(cudaStreamEndCapture(s.comm, &graph), "end capture");
    size_t count = 0;
    cuda_ok(cudaGraphGetNodes(graph, nullptr, &count), "nodes");
    expect(count == 1, "one graph node, got " + std::to_string(count));
    expect(host_array(d, 1)[0] == 1.0f, "nothing ran while capturing");
    cudaGraphExec_t exec;
    cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    for (int i = 0; i < 3; ++i) cuda_ok(cudaGraphLaunch(exec, s.comm), "launch");
    cuda_ok(cudaStreamSynchronize(s.comm), "sync");
    expect(host_array(d, 1)[0] == 8.0f, "three replays double it three times");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaFree(d);
  });
}

// Under TESSERA_EMU_ASYNC every stream runs behind the host, as a GPU does: a collective that does
// not wait for the compute stream's work reads the buffer before that work has written it.
TEST_CASE("nccl reference: without a stream wait the collective reads what the compute stream has not written",
          "[cuda][nccl]") {
  setenv("TESSERA_EMU_ASYNC", "1", 1);  // streams created from here on
  for (const bool wait : {true, false}) {
    two_ranks([wait](int rank, ncclComm_t& comm) {
      Streams s;
      std::vector<float> stale(4, 0.0f);
      float* d = device_array(stale);
      const std::vector<float> fresh(4, 1.0f);
      float* src = device_array(fresh);
      cuda_ok(cudaMemcpyAsync(d, src, 4 * sizeof(float), cudaMemcpyDeviceToDevice, s.compute), "copy");
      if (wait) {
        cudaEvent_t ready;
        cuda_ok(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "event");
        cuda_ok(cudaEventRecord(ready, s.compute), "record");
        cuda_ok(cudaStreamWaitEvent(s.comm, ready, 0), "wait");
        cudaEventDestroy(ready);
      }
      nccl_ok(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, comm, s.comm), "allreduce");
      cudaEvent_t done;
      cuda_ok(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
      cuda_ok(cudaEventRecord(done, s.comm), "record");
      while (cudaEventQuery(done) == cudaErrorNotReady) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const float reduced = host_array(d, 4)[0];  // (the copy runs now, after the collective)
      cudaEventDestroy(done);
      cudaFree(d);
      cudaFree(src);
      if (wait) expect(reduced == 2.0f, "with the wait: the sum of the fresh values");
      else
        expect(reduced == 1.0f,
               "without the wait the collective read the stale buffer (got " + std::to_string(reduced) + ")");
    });
  }
  unsetenv("TESSERA_EMU_ASYNC");
}

// A stream that waits for a collective still in flight does not block the host: it gets a node that
// completes with the collective, and its later work runs after it.
TEST_CASE("nccl reference: a stream waiting for a collective in flight runs its work after it", "[cuda][nccl]") {
  setenv("TESSERA_EMU_ASYNC", "1", 1);
  two_ranks([](int rank, ncclComm_t& comm) {
    Streams s;
    float* d = device_array(std::vector<float>{1.0f});
    float* out = device_array(std::vector<float>{0.0f});
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    nccl_ok(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, comm, s.comm), "allreduce");
    cudaEvent_t done;
    cuda_ok(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
    cuda_ok(cudaEventRecord(done, s.comm), "record");
    const auto before = std::chrono::steady_clock::now();
    cuda_ok(cudaStreamWaitEvent(s.compute, done, 0), "wait");
    cudaEventDestroy(done);  // the wait keeps what it needs
    cuda_ok(cudaMemcpyAsync(out, d, sizeof(float), cudaMemcpyDeviceToDevice, s.compute), "copy after the wait");
    if (rank == 0)
      expect(std::chrono::steady_clock::now() - before < std::chrono::milliseconds(200),
             "the wait did not block the host while rank 1 was late");
    cuda_ok(cudaStreamSynchronize(s.compute), "sync");
    expect(host_array(out, 1)[0] == 2.0f, "the copy read the reduced value");
    cudaFree(d);
    cudaFree(out);
  });
  unsetenv("TESSERA_EMU_ASYNC");
}

TEST_CASE("nccl reference: ncclCommAbort ends a collective whose peer never comes", "[cuda][nccl]") {
  two_ranks([](int rank, ncclComm_t& comm) {
    if (rank == 1) return;  // never calls the collective
    Streams s;
    float* d = device_array(std::vector<float>{1.0f});
    nccl_ok(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, comm, s.comm), "allreduce");
    cudaEvent_t done;
    cuda_ok(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
    cuda_ok(cudaEventRecord(done, s.comm), "record");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    expect(cudaEventQuery(done) == cudaErrorNotReady, "waits for rank 1");
    nccl_ok(ncclCommAbort(comm), "abort");  // what the communicator does at its deadline
    comm = nullptr;
    expect(cudaEventQuery(done) == cudaSuccess, "the aborted collective no longer holds its stream");
    cudaEventDestroy(done);
    cudaFree(d);
  });
}

TEST_CASE("nccl reference: ranks that call different collectives get an error naming both, not garbage",
          "[cuda][nccl]") {
  two_ranks([](int rank, ncclComm_t& comm) {
    Streams s;
    float* d = device_array(std::vector<float>(5, 1.0f));
    nccl_ok(ncclAllReduce(d, d, rank == 0 ? 4 : 5, ncclFloat32, ncclSum, comm, s.comm), "allreduce");
    cuda_ok(cudaStreamSynchronize(s.comm), "sync");
    ncclResult_t async = ncclSuccess;
    nccl_ok(ncclCommGetAsyncError(comm, &async), "async error");
    expect(async == ncclInvalidUsage, "an invalid-usage error");
    const std::string message = ncclGetLastError(comm);
    expect(message.find("of 4") != std::string::npos && message.find("of 5") != std::string::npos,
           "the message names both calls: " + message);
    cudaFree(d);
  });
}
