// CUDA Graphs on a device's stream (core/graph.h): the capture, the graph's private memory pool,
// the host data its copies read, and replay. The same source runs on a GPU and on the emulator,
// which records the stream's work instead of running it and enforces the rules of capture.
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "tessera/core/dispatch.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/graph.h"

namespace tessera::cuda {

namespace {

// The capture under way on a device.
struct Capture {
  uintptr_t pool;              // the allocator's key for the graph's private pool
  std::vector<Tensor> staged;  // pinned host copies that the graph's host-to-device copies read
  int first_check;             // the first id of the data-dependent checks issued while capturing
};

std::mutex capture_mutex;
std::map<int, Capture*> capture_by_device;
uintptr_t last_pool_key = 0;  // pool keys 1, 2, ...: never a stream's address

Capture* capture_of(int device) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  const auto it = capture_by_device.find(device);
  return it == capture_by_device.end() ? nullptr : it->second;
}

class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(int device, cudaGraph_t graph, cudaGraphExec_t exec, Capture capture, std::map<int, RangeCheck> checks)
      : device_(device), graph_(graph), exec_(exec), capture_(std::move(capture)), checks_(std::move(checks)) {
    size_t n = 0;
    check(cudaGraphGetNodes(graph_, nullptr, &n), "cudaGraphGetNodes");
    nodes_ = static_cast<int64_t>(n);
  }
  ~CudaGraph() override {
    DeviceGuard guard(Device::cuda(device_));
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
    caching_allocator(device_).drop_pool(capture_.pool);
  }
  void replay() override {
    DeviceGuard guard(Device::cuda(device_));
    count_device_launch();
    // The graph's kernels report bad values into the records their checks were issued with; the
    // next synchronisation reads them as it reads an eager launch's.
    reissue_checks(device_, checks_);
    check(cudaGraphLaunch(exec_, current_stream(device_)), "cudaGraphLaunch");
  }
  int64_t nodes() const override { return nodes_; }

 private:
  int device_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  Capture capture_;
  std::map<int, RangeCheck> checks_;
  int64_t nodes_ = 0;
};

// Marks `device` as capturing into `c` (null: no longer), for the allocator and the copies.
void set_capture(int device, Capture* c) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (c) capture_by_device[device] = c;
  else capture_by_device.erase(device);
  detail::set_capture_in_progress(c != nullptr);
}

}  // namespace

uintptr_t allocation_pool(int device) {
  if (capture_in_progress() && !allocating_outside_graph())
    if (const Capture* c = capture_of(device)) return c->pool;
  return reinterpret_cast<uintptr_t>(current_stream(device));
}

const void* host_source_for_copy(int device, const Tensor& host) {
  Capture* c = capture_in_progress() ? capture_of(device) : nullptr;
  if (!c) return host.raw_data();
  // A replay reads the source again, long after the caller has freed or changed it: the graph
  // reads its own pinned copy of the bytes as they were when captured.
  Tensor staged = empty_pinned(host.shape(), host.dtype());
  std::memcpy(staged.raw_data(), host.raw_data(), static_cast<size_t>(host.numel()) * host.element_size());
  c->staged.push_back(staged);
  return staged.raw_data();
}

std::unique_ptr<DeviceGraph> capture(int device, const std::function<void()>& work) {
  // Reached through core's capture_graph, which refuses a nested capture.
  DeviceGuard guard(Device::cuda(device));
  synchronize_device(device);  // an earlier kernel's failed check is reported as its own, not the capture's
  Capture c{++last_pool_key, {}, next_check_id(device)};
  CachingAllocator& allocator = caching_allocator(device);
  allocator.hold_pool(c.pool);
  const cudaStream_t stream = current_stream(device);
  // Marked before the capture begins: from then on the pinned allocator queries no event.
  set_capture(device, &c);
  const cudaError_t began = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  if (began != cudaSuccess) {
    set_capture(device, nullptr);
    cudaGetLastError();
    allocator.drop_pool(c.pool);
    check(began, "cudaStreamBeginCapture");
  }
  // Ends the capture; the graph, or null with `status` saying why.
  cudaError_t status = cudaSuccess;
  const auto end = [&] {
    cudaGraph_t g = nullptr;
    status = cudaStreamEndCapture(stream, &g);
    set_capture(device, nullptr);
    if (status != cudaSuccess) cudaGetLastError();
    return g;
  };
  const auto abandon = [&](cudaGraph_t g) {
    if (g) cudaGraphDestroy(g);
    c.staged.clear();
    allocator.drop_pool(c.pool);
  };
  try {
    work();
  } catch (const CaptureError&) {
    abandon(end());
    throw;
  } catch (const Error& e) {
    cudaStreamCaptureStatus state = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream, &state);
    abandon(end());
    // A CUDA call the capture forbade (an allocation in the wrong mode, a synchronisation) fails
    // inside the work and invalidates the capture: that is the capture's failure, not the work's.
    if (state == cudaStreamCaptureStatusInvalidated) throw CaptureError(e.what());
    throw;
  } catch (...) {
    abandon(end());
    throw;
  }
  cudaGraph_t graph = end();
  if (status != cudaSuccess) {
    abandon(graph);
    throw CaptureError(detail::concat("CUDA Graph capture failed: ", cudaGetErrorString(status), " (",
                                      cudaGetErrorName(status),
                                      "): the work did something a graph cannot record (a host synchronisation, "
                                      "a copy from pageable memory, a free, an event query)"));
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  if (made != cudaSuccess) {
    cudaGetLastError();
    abandon(graph);
    throw CaptureError(
        detail::concat("cudaGraphInstantiate: ", cudaGetErrorString(made), " (", cudaGetErrorName(made), ")"));
  }
  std::map<int, RangeCheck> checks = checks_since(device, c.first_check);
  return std::make_unique<CudaGraph>(device, graph, exec, std::move(c), std::move(checks));
}

}  // namespace tessera::cuda
