// The "nccl" communicator: CUDA tensors, one GPU per process (cuda:<local rank>), bootstrapped
// over MPI (rank 0's ncclUniqueId is broadcast by the mpi communicator, which also ends the job on
// a timeout). Collectives run on a stream of their own: each first waits, through an event, for
// the work Tessera has queued on the device's compute stream, so it reads finished gradients while
// the compute stream goes on with backward; completion is an event the host polls against the
// deadline. A job of one rank (no launcher) needs no MPI: its id never leaves the process.
//
// The same source in the real CUDA build (NCCL) and in the emulator build (NCCL's reference,
// cuda/libs/nccl_reference.cpp), where CI runs it as two ranks; on GPUs one rank has run on an H100,
// several not yet (docs/distributed.md).
#include <nccl.h>

#include <cstring>

#include "tessera/core/backend.h"
#include "tessera/core/error.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/runtime.h"
#include "tessera/train/distributed/communicator.h"

namespace tessera::train::dist {

namespace {

// `what` names the call ("ncclCommInitRank") or the collective ("nccl allreduce(avg) of ...").
void check_nccl(ncclResult_t status, const std::string& what) {
  if (status != ncclSuccess)
    throw Error((what.rfind("nccl", 0) == 0 ? what : "nccl " + what) + ": " + ncclGetErrorString(status));
}

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    default: throw Error(std::string("nccl: ") + dtype_name(dt) + " tensors are not reduced");
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

std::string describe_op(const std::string& op, const Tensor& t) {
  return "nccl " + op + " of " + std::to_string(t.numel()) + " " + dtype_name(t.dtype());
}

class NcclWork final : public Work {
 public:
  NcclWork(Communicator& comm, std::string what, ncclComm_t nccl, cudaEvent_t done, std::vector<Tensor> keep)
      : Work(comm, std::move(what)), nccl_(nccl), done_event_(done), keep_(std::move(keep)) {}
  ~NcclWork() override {
    if (!done_) wait();  // the buffers must outlive the collective
    cudaEventDestroy(done_event_);
  }
  bool test() override {
    if (done_) return true;
    const cudaError_t status = cudaEventQuery(done_event_);
    if (status == cudaSuccess) return done_ = true;
    if (status != cudaErrorNotReady) cuda::check(status, "nccl: waiting for a collective");
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(nccl_, &async);
    if (async != ncclSuccess && async != ncclInProgress) check_nccl(async, "collective failed");
    return false;
  }

 private:
  ncclComm_t nccl_;
  cudaEvent_t done_event_;
  std::vector<Tensor> keep_;
  bool done_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int size, int device, std::shared_ptr<Communicator> bootstrap)
      : rank_(rank), size_(size), device_(device), bootstrap_(std::move(bootstrap)) {
    ncclUniqueId id;
    if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (bootstrap_) {  // 128 bytes through the MPI communicator
      static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
      Tensor bytes = Tensor::empty({static_cast<int64_t>(sizeof id / sizeof(int64_t))}, DType::Int64, Device::cpu());
      std::memcpy(bytes.data<int64_t>(), &id, sizeof id);
      bootstrap_->broadcast(bytes, 0);
      std::memcpy(&id, bytes.data<int64_t>(), sizeof id);
    }
    DeviceGuard guard(this->device());
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "nccl: creating its stream");
    check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (!aborted_) ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }

  std::unique_ptr<Work> allreduce_async(const Tensor& t, ReduceOp op) override {
    check_operand("allreduce", t);
    return launch(describe_op(std::string("allreduce(") + reduce_op_name(op) + ")", t), {t}, [&] {
      return ncclAllReduce(t.device_raw_data(), t.device_raw_data(), static_cast<size_t>(t.numel()),
                           nccl_type(t.dtype()), nccl_op(op), comm_, stream_);
    });
  }
  std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) override {
    check_operand("broadcast", t);
    TS_CHECK(root >= 0 && root < size_, "nccl broadcast: root ", root, " is not a rank of ", size_);
    return launch(describe_op("broadcast", t), {t}, [&] {
      return ncclBroadcast(t.device_raw_data(), t.device_raw_data(), static_cast<size_t>(t.numel()),
                           nccl_type(t.dtype()), root, comm_, stream_);
    });
  }
  std::unique_ptr<Work> allgather_async(const Tensor& in, const Tensor& out) override {
    check_operand("allgather", in);
    check_operand("allgather", out);
    TS_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size_, "nccl allgather: expected an output of ",
             in.numel() * size_, " ", dtype_name(in.dtype()), ", got ", describe(out));
    return launch(describe_op("allgather", in), {in, out}, [&] {
      return ncclAllGather(in.device_raw_data(), out.device_raw_data(), static_cast<size_t>(in.numel()),
                           nccl_type(in.dtype()), comm_, stream_);
    });
  }
  std::unique_ptr<Work> reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_operand("reduce_scatter", in);
    check_operand("reduce_scatter", out);
    TS_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size_,
             "nccl reduce_scatter: expected an input "
             "of ",
             out.numel() * size_, " ", dtype_name(out.dtype()), ", got ", describe(in));
    return launch(describe_op("reduce_scatter", in), {in, out}, [&] {
      return ncclReduceScatter(in.device_raw_data(), out.device_raw_data(), static_cast<size_t>(out.numel()),
                               nccl_type(in.dtype()), nccl_op(op), comm_, stream_);
    });
  }
  std::unique_ptr<Work> barrier_async() override {
    // NCCL has no barrier: a one-element allreduce that every rank must reach.
    Tensor token = Tensor::empty({1}, DType::Float32, device());
    token.zero_();
    return allreduce_async(token, ReduceOp::Sum);
  }

  std::unique_ptr<Communicator> duplicate() const override {
    auto dup = std::make_unique<NcclCommunicator>(rank_, size_, device_, bootstrap_);
    dup->timeout_ = timeout_;
    return dup;
  }

  void abort_job() override {
    aborted_ = true;
    ncclCommAbort(comm_);  // frees the GPU side of collectives that will never complete
    if (bootstrap_) bootstrap_->abort_job();
  }

 private:
  template <class F>
  std::unique_ptr<Work> launch(std::string what, std::vector<Tensor> keep, F&& call) {
    DeviceGuard guard(device());
    // After the work already queued on the compute stream (the gradients being reduced).
    cudaEvent_t ready, done;
    cuda::check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "nccl: creating an event");
    cuda::check(cudaEventRecord(ready, cuda::current_stream(device_)), "nccl: recording an event");
    cuda::check(cudaStreamWaitEvent(stream_, ready, 0), "nccl: ordering after the compute stream");
    cudaEventDestroy(ready);
    check_nccl(call(), what);
    cuda::check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "nccl: creating an event");
    cuda::check(cudaEventRecord(done, stream_), "nccl: recording an event");
    return std::make_unique<NcclWork>(*this, std::move(what), comm_, done, std::move(keep));
  }

  int rank_, size_, device_;
  std::shared_ptr<Communicator> bootstrap_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool aborted_ = false;
};

std::unique_ptr<Communicator> make_nccl(const LaunchEnv& env, const CommunicatorOptions& options) {
  TS_CHECK(options.device.type == DeviceType::CUDA, "nccl communicator: reduces tensors on cuda, the model is on ",
           options.device.str());
  int count = 0;
  cuda::check(cudaGetDeviceCount(&count), "nccl communicator: counting GPUs");
  TS_CHECK(env.local_rank < count, "nccl communicator: local rank ", env.local_rank, " needs GPU cuda:", env.local_rank,
           " but this machine has ", count, "; start at most one process per GPU");
  std::shared_ptr<Communicator> bootstrap;
  if (env.distributed()) {
    CommunicatorOptions mpi = options;
    mpi.backend = "mpi";
    mpi.device = Device::cpu();
    bootstrap = create_communicator(env, mpi);
  }
  return std::make_unique<NcclCommunicator>(env.rank, env.world_size, env.local_rank, std::move(bootstrap));
}

const bool registered = [] {
  register_communicator_backend("nccl", make_nccl);
  return true;
}();

}  // namespace

}  // namespace tessera::train::dist
