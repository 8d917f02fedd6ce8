// Collectives between the processes of a data-parallel job (docs/distributed.md).
//
// A Communicator joins `size()` processes, each with its `rank()`. Its collectives work in place
// on contiguous tensors of its device (the CPU for MPI, the process's GPU for NCCL) and must be
// called by every rank in the same order, as MPI and NCCL require. Each has an asynchronous form,
// which returns a Work to test or wait on while the caller computes, and a synchronous form, which
// is the asynchronous one waited for.
//
// Deadlines. No wait blocks for ever: a Work that is not complete `timeout_seconds()` after the
// wait began means another rank died or hangs, and the communicator ends the whole job
// (abort(): a message naming this rank and the collective, then MPI_Abort), so that no rank waits
// on a dead peer. The last checkpoint written stays intact: checkpoints appear atomically.
//
// Backends register themselves (train/distributed/backends/: "mpi", and "nccl" in a CUDA build
// with NCCL), so this layer names none of their libraries.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/train/distributed/env.h"

namespace tessera::train::dist {

enum class ReduceOp { Sum, Avg, Max, Min };
const char* reduce_op_name(ReduceOp op);

class Communicator;

// A collective in flight. It keeps its tensors alive until it completes.
class Work {
 public:
  virtual ~Work() = default;
  // Moves the collective on and says whether it is complete (never blocks).
  virtual bool test() = 0;
  // Blocks until complete; past the communicator's timeout, aborts the job.
  void wait();
  // Seconds spent inside wait() (the step's time spent waiting on communication).
  double waited_seconds() const { return waited_; }

 protected:
  Work(Communicator& comm, std::string what) : comm_(comm), what_(std::move(what)) {}
  // Blocks until complete or until `seconds` have passed; true when complete. The default polls
  // test(); a backend with a blocking wait of its own may do better.
  virtual bool wait_for(double seconds);
  Communicator& comm_;

 private:
  std::string what_;  // e.g. "allreduce(sum) of 6400 float32"
  double waited_ = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;
  // The device of the tensors its collectives take.
  virtual Device device() const = 0;

  // In place: every rank's `t` becomes the reduction of all ranks' `t`.
  virtual std::unique_ptr<Work> allreduce_async(const Tensor& t, ReduceOp op) = 0;
  // In place: every rank's `t` becomes root's `t`.
  virtual std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) = 0;
  // out (size() * in.numel() elements, in's dtype) holds every rank's `in`, in rank order.
  virtual std::unique_ptr<Work> allgather_async(const Tensor& in, const Tensor& out) = 0;
  // in (size() * out.numel() elements) is reduced over ranks; rank r keeps the r-th chunk in out.
  virtual std::unique_ptr<Work> reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) = 0;
  virtual std::unique_ptr<Work> barrier_async() = 0;

  void allreduce(const Tensor& t, ReduceOp op) { allreduce_async(t, op)->wait(); }
  void broadcast(const Tensor& t, int root) { broadcast_async(t, root)->wait(); }
  void allgather(const Tensor& in, const Tensor& out) { allgather_async(in, out)->wait(); }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) { reduce_scatter_async(in, out, op)->wait(); }
  void barrier() { barrier_async()->wait(); }
  // Root's string on every rank (over host memory, whatever the backend's device).
  std::string broadcast_string(const std::string& s, int root);

  // A communicator over the same ranks whose collectives never interleave with this one's: the
  // gradient reducer sends its buckets on one, so their order cannot clash with the collectives
  // the model's forward and backward make (synchronized batch norm).
  virtual std::unique_ptr<Communicator> duplicate() const = 0;

  // Ends every process of the job: prints "rank R: message" on stderr and exits non-zero.
  [[noreturn]] void abort(const std::string& message);
  // The backend's way of ending every process without a message (MPI_Abort); abort() exits if it
  // returns. NCCL's communicator calls its MPI bootstrap's.
  virtual void abort_job() = 0;

  double timeout_seconds() const { return timeout_; }
  void set_timeout_seconds(double seconds);

 protected:
  // Checks a tensor handed to a collective: defined, contiguous, on device(), of a dtype the
  // backend reduces.
  void check_operand(const char* op, const Tensor& t) const;
  double timeout_ = 300;
};

struct CommunicatorOptions {
  std::string backend = "auto";   // auto (nccl for cuda, mpi for cpu), mpi or nccl
  Device device = Device::cpu();  // the device the model trains on
  double timeout_seconds = 300;
};

// A backend's constructor: called on every rank of the launch described by `env`.
using CommunicatorFactory =
    std::function<std::unique_ptr<Communicator>(const LaunchEnv& env, const CommunicatorOptions& options)>;
// Called from a backend's static initializer.
void register_communicator_backend(const std::string& name, CommunicatorFactory factory);
std::vector<std::string> communicator_backends();  // registered names, sorted

// The backend `options.backend` names ("auto": nccl for a cuda device, mpi for the CPU), joined
// by every rank of the launch. Throws, naming the backend and what this build has, when it is not
// built.
std::unique_ptr<Communicator> create_communicator(const LaunchEnv& env, const CommunicatorOptions& options);

// The backend "auto" resolves to for a device.
std::string resolve_backend(const std::string& requested, Device device);

}  // namespace tessera::train::dist
