// The "mpi" communicator: CPU tensors, MPI's non-blocking collectives (MPI 3) on a duplicate of
// MPI_COMM_WORLD. MPI is initialized by the first communicator made (only when a launch asks for
// one, so a single-process run never touches MPI) and finalized when the program exits.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "tessera/core/error.h"
#include "tessera/train/distributed/communicator.h"

namespace tessera::train::dist {

namespace {

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void ensure_mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  // FUNNELED: only the thread that made the communicator calls MPI (the loader's workers never do).
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  std::atexit(finalize_mpi);
}

MPI_Datatype mpi_type(DType dt, const char* op) {
  switch (dt) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    default:
      throw Error(std::string("mpi ") + op + ": " + dtype_name(dt) +
                  " tensors are not reduced by the MPI backend (float32, float64 or int64)");
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;  // Avg divides once the sum is complete
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

int mpi_count(int64_t n, const char* op) {
  TS_CHECK(n <= std::numeric_limits<int>::max(), "mpi ", op, ": ", n, " elements exceed MPI's int count");
  return static_cast<int>(n);
}

// "mpi allreduce(sum) of 6400 float32": what a timeout message names.
std::string describe_op(const char* op, const Tensor& t) {
  return std::string("mpi ") + op + " of " + std::to_string(t.numel()) + " " + dtype_name(t.dtype());
}
std::string describe_op(const char* op, const Tensor& t, ReduceOp reduce) {
  return describe_op((std::string(op) + "(" + reduce_op_name(reduce) + ")").c_str(), t);
}

class MpiWork final : public Work {
 public:
  MpiWork(Communicator& comm, std::string what, std::vector<Tensor> keep, double scale = 1.0)
      : Work(comm, std::move(what)), keep_(std::move(keep)), scale_(scale) {}
  ~MpiWork() override {
    // A collective must complete before its buffers go; unwinding from an error included.
    if (!done_) wait();
  }
  MPI_Request* request() { return &request_; }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (!flag) return false;
    done_ = true;
    if (scale_ != 1.0) divide();
    return true;
  }

 private:
  void divide() {
    const Tensor& t = keep_.front();
    if (t.dtype() == DType::Float32) {
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(p[i] * scale_);
    } else {
      double* p = t.data<double>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] *= scale_;
    }
  }

  MPI_Request request_ = MPI_REQUEST_NULL;
  std::vector<Tensor> keep_;
  double scale_;
  bool done_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm parent) {
    MPI_Comm_dup(parent, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  Device device() const override { return Device::cpu(); }

  std::unique_ptr<Work> allreduce_async(const Tensor& t, ReduceOp op) override {
    check_operand("allreduce", t);
    TS_CHECK(op != ReduceOp::Avg || is_floating(t.dtype()), "mpi allreduce(avg): ", dtype_name(t.dtype()),
             " tensors cannot be averaged; use sum");
    auto work = std::make_unique<MpiWork>(*this, describe_op("allreduce", t, op), std::vector<Tensor>{t},
                                          op == ReduceOp::Avg ? 1.0 / size_ : 1.0);
    MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), mpi_count(t.numel(), "allreduce"), mpi_type(t.dtype(), "allreduce"),
                   mpi_op(op), comm_, work->request());
    return work;
  }

  std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) override {
    check_operand("broadcast", t);
    TS_CHECK(root >= 0 && root < size_, "mpi broadcast: root ", root, " is not a rank of ", size_);
    auto work = std::make_unique<MpiWork>(*this, describe_op("broadcast", t), std::vector<Tensor>{t});
    MPI_Ibcast(t.raw_data(), mpi_count(t.numel(), "broadcast"), mpi_type(t.dtype(), "broadcast"), root, comm_,
               work->request());
    return work;
  }

  std::unique_ptr<Work> allgather_async(const Tensor& in, const Tensor& out) override {
    check_operand("allgather", in);
    check_operand("allgather", out);
    TS_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size_, "mpi allgather: expected an output of ",
             in.numel() * size_, " ", dtype_name(in.dtype()), " (", size_, " ranks x ", in.numel(), "), got ",
             describe(out));
    auto work = std::make_unique<MpiWork>(*this, describe_op("allgather", in), std::vector<Tensor>{in, out});
    const MPI_Datatype type = mpi_type(in.dtype(), "allgather");
    const int n = mpi_count(in.numel(), "allgather");
    MPI_Iallgather(in.raw_data(), n, type, out.raw_data(), n, type, comm_, work->request());
    return work;
  }

  std::unique_ptr<Work> reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_operand("reduce_scatter", in);
    check_operand("reduce_scatter", out);
    TS_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size_,
             "mpi reduce_scatter: expected an input "
             "of ",
             out.numel() * size_, " ", dtype_name(out.dtype()), " (", size_, " ranks x ", out.numel(), "), got ",
             describe(in));
    TS_CHECK(op != ReduceOp::Avg || is_floating(out.dtype()), "mpi reduce_scatter(avg): ", dtype_name(out.dtype()),
             " tensors cannot be averaged; use sum");
    // The division of Avg applies to the output, the first tensor kept.
    auto work = std::make_unique<MpiWork>(*this, describe_op("reduce_scatter", in, op), std::vector<Tensor>{out, in},
                                          op == ReduceOp::Avg ? 1.0 / size_ : 1.0);
    MPI_Ireduce_scatter_block(in.raw_data(), out.raw_data(), mpi_count(out.numel(), "reduce_scatter"),
                              mpi_type(in.dtype(), "reduce_scatter"), mpi_op(op), comm_, work->request());
    return work;
  }

  std::unique_ptr<Work> barrier_async() override {
    auto work = std::make_unique<MpiWork>(*this, "mpi barrier", std::vector<Tensor>{});
    MPI_Ibarrier(comm_, work->request());
    return work;
  }

  std::unique_ptr<Communicator> duplicate() const override {
    auto dup = std::make_unique<MpiCommunicator>(comm_);
    dup->timeout_ = timeout_;
    return dup;
  }

  void abort_job() override { MPI_Abort(MPI_COMM_WORLD, 1); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

std::unique_ptr<Communicator> make_mpi(const LaunchEnv& env, const CommunicatorOptions& options) {
  TS_CHECK(options.device.is_cpu(), "mpi communicator: reduces CPU tensors, the model is on ", options.device.str());
  ensure_mpi_initialized();
  auto comm = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
  TS_CHECK(comm->size() == env.world_size && comm->rank() == env.rank, "mpi communicator: MPI reports rank ",
           comm->rank(), " of ", comm->size(), " but the launch environment (", env.launcher, ") says rank ", env.rank,
           " of ", env.world_size, "; launch with mpirun or srun, which set both");
  return comm;
}

const bool registered = [] {
  register_communicator_backend("mpi", make_mpi);
  return true;
}();

}  // namespace

}  // namespace tessera::train::dist
