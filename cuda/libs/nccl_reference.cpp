// The emulator's NCCL: the collectives of cuda/emu/include/nccl.h between the processes of a job,
// each with its emulated device, by NCCL's documented contract: in-place or separate buffers,
// every data type NCCL has (bfloat16 and float16 too), sum, product, max, min and average, and
// collectives called in the same order on every rank.
//
// As on a GPU, a collective is one node on the stream it is given (cuda/emu/cuda_runtime.h,
// enqueue_async): it starts in stream order, after the work the stream waits for, and completes
// when every rank's part has arrived; meanwhile the host goes on, and an event recorded after it is
// not ready. A collective inside a capture is one graph node, run at each replay. The data moves
// through a shared-memory segment per communicator (POSIX shm, named by the unique id), in rounds
// of at most kSlotBytes per rank, by a proxy thread per communicator (NCCL has one too), so that a
// rank waiting for a peer that died or hangs blocks no host thread; ncclCommAbort ends that wait.
//
// Reductions add the ranks' values in rank order, in float32 for the half types, rounding back to
// the stored type after each addition as a ring's steps do, so every rank gets the same bits.
// What this does not model: bandwidth, latency, topology, NCCL's choice of algorithm (ring or
// tree) and the order of additions that comes with it (docs/distributed.md).
#include "tessera/cuda/emu/include/nccl.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "tessera/core/half.h"
#include "tessera/ops/kernels/convert.h"

namespace {

using tessera::BFloat16;
using tessera::Float16;
using Clock = std::chrono::steady_clock;

constexpr int kMaxRanks = 256;
constexpr size_t kSlotBytes = size_t{1} << 20;  // each rank's part of one round
constexpr uint64_t kReadyMagic = 0x4e43434c52454631ULL;
constexpr char kIdPrefix[] = "tessera-nccl-reference ";

enum class Kind : int32_t { AllReduce, Broadcast, AllGather, ReduceScatter };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "ncclAllReduce";
    case Kind::Broadcast: return "ncclBroadcast";
    case Kind::AllGather: return "ncclAllGather";
    case Kind::ReduceScatter: return "ncclReduceScatter";
  }
  return "collective";
}

// What a rank says it is doing in a round: every rank must say the same.
struct Call {
  Kind kind;
  int32_t datatype, op, root;
  uint64_t count;
  bool operator==(const Call&) const = default;
};

struct Header {
  std::atomic<uint64_t> ready;  // kReadyMagic once rank 0 has set the header up
  int32_t nranks;
  std::atomic<int32_t> joined;
  std::atomic<uint64_t> arrived[kMaxRanks];   // the last round each rank has put its part in for
  std::atomic<uint64_t> departed[kMaxRanks];  // the last round each rank has finished reading
  Call calls[kMaxRanks];                      // each rank's call of its last round
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters need lock-free atomics");

size_t segment_bytes(int nranks) { return sizeof(Header) + static_cast<size_t>(nranks) * kSlotBytes; }

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
  }
  return 0;
}

// out[i] = op over ranks r (in rank order) of part(r)[i], for n elements of T; C is the type the
// additions are done in.
template <class T, class C>
void reduce_parts(const std::function<const void*(int)>& part, int nranks, size_t n, ncclRedOp_t op, void* out) {
  T* dst = static_cast<T*>(out);
  for (size_t i = 0; i < n; ++i) {
    auto load = [&](int r) { return static_cast<C>(tessera::convert::to_double(static_cast<const T*>(part(r))[i])); };
    auto store = [](C v) { return tessera::convert::from_double<T>(static_cast<double>(v)); };
    T acc = static_cast<const T*>(part(0))[i];
    for (int r = 1; r < nranks; ++r) {
      const C a = static_cast<C>(tessera::convert::to_double(acc)), b = load(r);
      switch (op) {
        case ncclSum:
        case ncclAvg: acc = store(a + b); break;
        case ncclProd: acc = store(a * b); break;
        case ncclMax: acc = store(std::max(a, b)); break;
        case ncclMin: acc = store(std::min(a, b)); break;
      }
    }
    if (op == ncclAvg) acc = store(static_cast<C>(tessera::convert::to_double(acc)) / static_cast<C>(nranks));
    dst[i] = acc;
  }
}

void reduce_typed(ncclDataType_t t, const std::function<const void*(int)>& part, int nranks, size_t n, ncclRedOp_t op,
                  void* out) {
  switch (t) {
    case ncclInt8: return reduce_parts<int8_t, int64_t>(part, nranks, n, op, out);
    case ncclUint8: return reduce_parts<uint8_t, int64_t>(part, nranks, n, op, out);
    case ncclInt32: return reduce_parts<int32_t, int64_t>(part, nranks, n, op, out);
    case ncclUint32: return reduce_parts<uint32_t, int64_t>(part, nranks, n, op, out);
    case ncclInt64: return reduce_parts<int64_t, int64_t>(part, nranks, n, op, out);
    case ncclUint64: return reduce_parts<uint64_t, uint64_t>(part, nranks, n, op, out);
    case ncclFloat16: return reduce_parts<Float16, float>(part, nranks, n, op, out);
    case ncclBfloat16: return reduce_parts<BFloat16, float>(part, nranks, n, op, out);
    case ncclFloat32: return reduce_parts<float, float>(part, nranks, n, op, out);
    case ncclFloat64: return reduce_parts<double, double>(part, nranks, n, op, out);
  }
}

// One collective as queued: a fresh copy runs at each start of its node (a graph replays it).
struct Collective {
  Call call;
  const void* send;
  void* recv;
  std::atomic<bool> done{false};
};

}  // namespace

struct ncclComm {
  int rank = 0, nranks = 1, device = 0;
  Header* header = nullptr;
  unsigned char* slots = nullptr;
  size_t mapped = 0;
  uint64_t round = 0;  // rounds done (the proxy's)
  std::atomic<bool> aborting{false}, stopping{false};
  std::atomic<ncclResult_t> async_error{ncclSuccess};
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Collective>> queue;
  std::string last_error;
  std::thread proxy;

  unsigned char* slot(int r) { return slots + static_cast<size_t>(r) * kSlotBytes; }

  void fail(ncclResult_t result, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      last_error = message;
    }
    async_error.store(result);
  }

  // Waits until every rank's counter has reached `target`; false when aborted first.
  bool wait_all(std::atomic<uint64_t>* counters, uint64_t target) {
    for (int spins = 0;; ++spins) {
      bool all = true;
      for (int r = 0; r < nranks && all; ++r) all = counters[r].load(std::memory_order_acquire) >= target;
      if (all) return true;
      if (aborting.load()) return false;
      if (spins < 64) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(spins < 1000 ? 20 : 200));
    }
  }

  // One round: `put` fills this rank's slot, `take` reads every rank's once all have put theirs.
  bool run_round(const Call& call, const std::function<void(unsigned char*)>& put, const std::function<void()>& take) {
    const uint64_t g = ++round;
    if (!wait_all(header->departed, g - 1)) return false;  // every slot's last round has been read
    put(slot(rank));
    header->calls[rank] = call;
    header->arrived[rank].store(g, std::memory_order_release);
    if (!wait_all(header->arrived, g)) return false;
    for (int r = 0; r < nranks; ++r)
      if (!(header->calls[r] == call)) {
        fail(ncclInvalidUsage, std::string("nccl reference: rank ") + std::to_string(rank) + " called " +
                                   kind_name(call.kind) + " of " + std::to_string(call.count) +
                                   " elements where rank " + std::to_string(r) + " called " +
                                   kind_name(header->calls[r].kind) + " of " + std::to_string(header->calls[r].count) +
                                   " (collectives must be the same, in the same order, on every rank)");
        return false;
      }
    take();
    header->departed[rank].store(g, std::memory_order_release);
    return true;
  }

  bool execute(Collective& c) {
    const Call& call = c.call;
    const auto type = static_cast<ncclDataType_t>(call.datatype);
    const size_t es = type_size(type), per_round = kSlotBytes / es;
    const auto* send = static_cast<const unsigned char*>(c.send);
    auto* recv = static_cast<unsigned char*>(c.recv);
    const auto rounds = [&](size_t count, const std::function<bool(size_t, size_t)>& one) {
      for (size_t off = 0; off < count || (count == 0 && off == 0); off += per_round)
        if (!one(off, std::min(per_round, count - off))) return false;
      return true;
    };
    switch (call.kind) {
      case Kind::AllReduce:
        return rounds(call.count, [&](size_t off, size_t n) {
          return run_round(
              call, [&](unsigned char* mine) { std::memcpy(mine, send + off * es, n * es); },
              [&] {
                reduce_typed(
                    type, [&](int r) -> const void* { return slot(r); }, nranks, n, static_cast<ncclRedOp_t>(call.op),
                    recv + off * es);
              });
        });
      case Kind::Broadcast:
        return rounds(call.count, [&](size_t off, size_t n) {
          return run_round(
              call,
              [&](unsigned char* mine) {
                if (rank == call.root) std::memcpy(mine, send + off * es, n * es);
              },
              [&] { std::memmove(recv + off * es, slot(call.root), n * es); });
        });
      case Kind::AllGather:
        return rounds(call.count, [&](size_t off, size_t n) {
          return run_round(
              call, [&](unsigned char* mine) { std::memcpy(mine, send + off * es, n * es); },
              [&] {
                for (int r = 0; r < nranks; ++r)
                  std::memmove(recv + (static_cast<size_t>(r) * call.count + off) * es, slot(r), n * es);
              });
        });
      case Kind::ReduceScatter:
        for (int dest = 0; dest < nranks; ++dest) {
          const bool ok = rounds(call.count, [&](size_t off, size_t n) {
            return run_round(
                call,
                [&](unsigned char* mine) {
                  std::memcpy(mine, send + (static_cast<size_t>(dest) * call.count + off) * es, n * es);
                },
                [&] {
                  if (rank == dest)
                    reduce_typed(
                        type, [&](int r) -> const void* { return slot(r); }, nranks, n,
                        static_cast<ncclRedOp_t>(call.op), recv + off * es);
                });
          });
          if (!ok) return false;
        }
        return true;
    }
    return false;
  }

  void serve() {
    for (;;) {
      std::shared_ptr<Collective> c;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return !queue.empty() || stopping.load() || aborting.load(); });
        if (aborting.load() || (queue.empty() && stopping.load())) break;
        c = queue.front();
      }
      // After an error or an abort nothing more moves: NCCL's communicator is unusable then too.
      if (async_error.load() == ncclSuccess && !execute(*c) && async_error.load() == ncclSuccess)
        fail(ncclRemoteError, std::string("nccl reference: ") + kind_name(c->call.kind) + " on rank " +
                                  std::to_string(rank) + " was aborted while waiting for its peers");
      {
        std::lock_guard<std::mutex> lock(mutex);
        queue.pop_front();
      }
      c->done.store(true, std::memory_order_release);
      cv.notify_all();
    }
    // What is left completes (with the error set) so that no stream waits for ever.
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& c : queue) c->done.store(true, std::memory_order_release);
    queue.clear();
  }

  void post(std::shared_ptr<Collective> c) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (aborting.load()) {
        c->done.store(true);
        return;
      }
      queue.push_back(std::move(c));
    }
    cv.notify_all();
  }

  void shut_down(bool abort) {
    if (abort) aborting.store(true);
    stopping.store(true);
    cv.notify_all();
    if (proxy.joinable()) proxy.join();
    if (header) munmap(header, mapped);
    header = nullptr;
  }
};

namespace {

thread_local std::string init_error;

double init_timeout_seconds() {
  const char* v = std::getenv("TESSERA_EMU_NCCL_INIT_TIMEOUT");
  return v && std::atof(v) > 0 ? std::atof(v) : 120.0;
}

std::string segment_name(const ncclUniqueId& id) { return std::string(id.internal + sizeof kIdPrefix - 1); }

ncclResult_t init_failed(ncclResult_t result, const std::string& message) {
  init_error = message;
  return result;
}

ncclResult_t enqueue(Kind kind, const void* send, void* recv, size_t count, ncclDataType_t datatype, int op, int root,
                     ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  if (type_size(datatype) == 0 || op < ncclSum || op > ncclAvg || (count > 0 && (!send || !recv)) ||
      (kind == Kind::Broadcast && (root < 0 || root >= comm->nranks))) {
    comm->fail(ncclInvalidArgument, std::string("nccl reference: ") + kind_name(kind) + ": invalid argument");
    return ncclInvalidArgument;
  }
  if (comm->async_error.load() != ncclSuccess) return comm->async_error.load();
  const Call call{kind, datatype, op, kind == Kind::Broadcast ? root : 0, count};
  tessera::cuda::emu::enqueue_async(stream, kind_name(kind), [comm, call, send, recv] {
    auto c = std::make_shared<Collective>();
    c->call = call;
    c->send = send;
    c->recv = recv;
    comm->post(c);
    return tessera::cuda::emu::Poll([c] { return c->done.load(std::memory_order_acquire); });
  });
  return ncclSuccess;
}

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (!comm) return init_error.c_str();
  std::lock_guard<std::mutex> lock(comm->mutex);
  thread_local std::string copy;
  copy = comm->last_error;
  return copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof id->internal);
  std::random_device entropy;
  const std::string name =
      "/tessera-nccl-" + std::to_string(getpid()) + "-" + std::to_string(entropy()) + "-" + std::to_string(entropy());
  std::snprintf(id->internal, sizeof id->internal, "%s%s", kIdPrefix, name.c_str());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks)
    return init_failed(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                                                std::to_string(nranks) + " (at most " + std::to_string(kMaxRanks) +
                                                ")");
  if (std::strncmp(id.internal, kIdPrefix, sizeof kIdPrefix - 1) != 0)
    return init_failed(ncclInvalidArgument, "ncclCommInitRank: the unique id was not made by ncclGetUniqueId");
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  cudaGetDevice(&comm->device);
  comm->mapped = segment_bytes(nranks);
  const std::string name = segment_name(id);
  const auto deadline = Clock::now() + std::chrono::duration<double>(init_timeout_seconds());
  void* base = MAP_FAILED;
  if (nranks == 1) {
    base = mmap(nullptr, comm->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  } else {
    int fd = -1;
    if (rank == 0) {
      fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd >= 0 && ftruncate(fd, static_cast<off_t>(comm->mapped)) != 0) {
        close(fd);
        fd = -1;
      }
    } else {  // rank 0 may not have made it yet
      while ((fd = shm_open(name.c_str(), O_RDWR, 0600)) < 0 && errno == ENOENT && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      struct stat st {};
      while (fd >= 0 && fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) < sizeof(Header) &&
             Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (fd >= 0 && static_cast<size_t>(st.st_size) != comm->mapped) {
        close(fd);
        return init_failed(ncclInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) + " was told " +
                                                 std::to_string(nranks) + " ranks, rank 0 another number");
      }
    }
    if (fd < 0)
      return init_failed(ncclSystemError, "ncclCommInitRank: rank " + std::to_string(rank) +
                                              " could not open shared memory " + name + ": " + std::strerror(errno));
    base = mmap(nullptr, comm->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  if (base == MAP_FAILED) return init_failed(ncclSystemError, "ncclCommInitRank: mmap failed");
  comm->header = static_cast<Header*>(base);
  comm->slots = static_cast<unsigned char*>(base) + sizeof(Header);
  Header& h = *comm->header;
  if (rank == 0) {  // the fresh segment is zero-filled: counters at 0
    h.nranks = nranks;
    h.ready.store(kReadyMagic, std::memory_order_release);
  } else {
    while (h.ready.load(std::memory_order_acquire) != kReadyMagic && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  h.joined.fetch_add(1);
  while (h.joined.load() < nranks && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int joined = h.joined.load();
  if (rank == 0 && nranks > 1) shm_unlink(name.c_str());  // all have it mapped (or never will): nothing stays behind
  if (joined < nranks) {
    comm->shut_down(true);
    return init_failed(ncclSystemError, "ncclCommInitRank: only " + std::to_string(joined) + " of " +
                                            std::to_string(nranks) + " ranks joined within " +
                                            std::to_string(static_cast<int>(init_timeout_seconds())) + " s");
  }
  ncclComm* c = comm.get();
  comm->proxy = std::thread([c] { c->serve(); });
  *out = comm.release();
  return ncclSuccess;
}

// As NCCL's: first completes what was queued.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  comm->shut_down(false);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  comm->shut_down(true);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (!comm) return ncclInvalidArgument;
  *async_error = comm->async_error.load();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = comm->nranks;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  *device = comm->device;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(Kind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(Kind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(Kind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(Kind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }
