#include "tessera/train/distributed/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "tessera/core/error.h"

namespace tessera::train::dist {

namespace {

using Clock = std::chrono::steady_clock;

struct Registry {
  std::mutex mu;
  std::map<std::string, CommunicatorFactory> factories;
};
Registry& registry() {
  static Registry r;  // constructed on first use: backends register during static initialization
  return r;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

bool Work::wait_for(double seconds) {
  // Polling keeps a non-blocking collective moving (MPI progresses only inside its calls). The
  // sleep grows to 1 ms so that a long wait does not take a core from the ranks still computing.
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  int spins = 0;
  while (!test()) {
    if (Clock::now() >= deadline) return false;
    if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 1000 ? 1000 : 50));
  }
  return true;
}

void Work::wait() {
  const auto start = Clock::now();
  const bool done = wait_for(comm_.timeout_seconds());
  waited_ += std::chrono::duration<double>(Clock::now() - start).count();
  if (!done) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", comm_.timeout_seconds());
    comm_.abort(what_ + " did not complete within --dist-timeout " + seconds +
                " s: another rank has died or hangs. Aborting the job; the last checkpoint written is intact.");
  }
}

void Communicator::abort(const std::string& message) {
  std::fprintf(stderr, "rank %d: %s\n", rank(), message.c_str());
  std::fflush(stderr);
  abort_job();
  std::_Exit(1);
}

void Communicator::set_timeout_seconds(double seconds) {
  TS_CHECK(seconds > 0, "--dist-timeout: expected a positive number of seconds, got ", seconds);
  timeout_ = seconds;
}

void Communicator::check_operand(const char* op, const Tensor& t) const {
  TS_CHECK(t.defined(), backend(), " ", op, ": the tensor is undefined");
  TS_CHECK(t.is_contiguous(), backend(), " ", op, ": expected a contiguous tensor, got ", describe(t));
  TS_CHECK(t.device() == device(), backend(), " ", op, ": the tensor is on ", t.device().str(),
           " but this communicator works on ", device().str());
  TS_CHECK(t.dtype() != DType::Bool, backend(), " ", op, ": bool tensors are not reduced; use int64");
}

std::string Communicator::broadcast_string(const std::string& s, int root) {
  Tensor length = Tensor::empty({1}, DType::Int64, Device::cpu());
  length.data<int64_t>()[0] = static_cast<int64_t>(s.size());
  // Host tensors: a backend on a GPU moves these small values through its device.
  auto on_device = [&](const Tensor& t) { return device().is_cpu() ? t : t.to(device()); };
  Tensor n = on_device(length);
  broadcast(n, root);
  const int64_t size = n.to(Device::cpu()).data<int64_t>()[0];
  Tensor bytes = Tensor::empty({size}, DType::Int64, Device::cpu());
  for (int64_t i = 0; i < size; ++i)
    bytes.data<int64_t>()[i] = rank() == root ? static_cast<unsigned char>(s[static_cast<size_t>(i)]) : 0;
  if (size > 0) {
    Tensor b = on_device(bytes);
    broadcast(b, root);
    bytes = b.to(Device::cpu());
  }
  std::string out(static_cast<size_t>(size), '\0');
  for (int64_t i = 0; i < size; ++i) out[static_cast<size_t>(i)] = static_cast<char>(bytes.data<int64_t>()[i]);
  return out;
}

void register_communicator_backend(const std::string& name, CommunicatorFactory factory) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().factories[name] = std::move(factory);
}

std::vector<std::string> communicator_backends() {
  std::lock_guard<std::mutex> lock(registry().mu);
  std::vector<std::string> names;
  for (const auto& [name, f] : registry().factories) names.push_back(name);
  return names;
}

std::string resolve_backend(const std::string& requested, Device device) {
  TS_CHECK(requested == "auto" || requested == "mpi" || requested == "nccl",
           "--dist-backend: expected auto, mpi or nccl, got '", requested, "'");
  if (requested != "auto") return requested;
  return device.is_cpu() ? "mpi" : "nccl";
}

std::unique_ptr<Communicator> create_communicator(const LaunchEnv& env, const CommunicatorOptions& options) {
  const std::string name = resolve_backend(options.backend, options.device);
  TS_CHECK(name != "nccl" || !options.device.is_cpu(),
           "--dist-backend nccl: NCCL reduces tensors on cuda, but the "
           "model trains on ",
           options.device.str(), "; use --dist-backend mpi (or auto) on the CPU");
  TS_CHECK(name != "mpi" || options.device.is_cpu(),
           "--dist-backend mpi: the MPI backend reduces CPU tensors, but "
           "the model trains on ",
           options.device.str(), "; use --dist-backend nccl (or auto) on a GPU");
  CommunicatorFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    auto it = registry().factories.find(name);
    if (it != registry().factories.end()) factory = it->second;
  }
  TS_CHECK(static_cast<bool>(factory), "distributed training: the ", name,
           " backend is not built into this program "
           "(built: ",
           join(communicator_backends()), "); ",
           name == "mpi" ? "install libopenmpi-dev and configure "
                           "with -DTESSERA_MPI=ON"
                         : "configure the CUDA build (-DTESSERA_CUDA=ON) with MPI and NCCL installed",
           ". Launched with ", env.launcher, "=", env.world_size);
  std::unique_ptr<Communicator> comm = factory(env, options);
  comm->set_timeout_seconds(options.timeout_seconds);
  return comm;
}

}  // namespace tessera::train::dist
