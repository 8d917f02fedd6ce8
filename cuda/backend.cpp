// The CUDA backend's registration with core (core/backend.h): device discovery, the current
// device, streams, synchronisation, and the host <-> device transfer kernels. This object is linked
// into every program that links Tessera (cuda/CMakeLists.txt), so its static registration always
// runs; it touches no device until one is used.
#include <memory>
#include <mutex>

#include "tessera/core/dispatch.h"
#include "tessera/core/error.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/graph.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/per_device.h"
#include "tessera/ops/kernels/copy.h"

namespace tessera::cuda {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw Error(detail::concat(what, ": ", cudaGetErrorString(status), " (", cudaGetErrorName(status), ")"));
}

namespace {

class CudaBackend final : public DeviceBackend {
 public:
  int device_count() override {
    std::call_once(probed_, [this] {
      const cudaError_t status = cudaGetDeviceCount(&count_);
      if (status != cudaSuccess) {
        cudaGetLastError();
        count_ = 0;
        reason_ = detail::concat("the CUDA runtime reports: ", cudaGetErrorString(status), " (",
                                 cudaGetErrorName(status), ")");
      } else if (count_ == 0) {
        reason_ = "no CUDA device is visible (check CUDA_VISIBLE_DEVICES and the driver)";
      }
    });
    return count_;
  }
  std::string unavailable_reason() override {
    device_count();
    return reason_;
  }
  std::string description() override {
#if defined(TESSERA_CUDA_EMU)
    return "CUDA on the SIMT emulator (kernels run on the CPU, checked)";
#else
    if (device_count() == 0) return "CUDA (no usable device: " + reason_ + ")";
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return detail::concat("CUDA ", runtime / 1000, ".", runtime % 1000 / 10, ", ", prop.name, " (sm_", prop.major,
                          prop.minor, ")");
#endif
  }
  Allocator& allocator(int index) override { return device_allocator(index); }
  void synchronize(int index) override { synchronize_device(index); }
  int current_device() override {
    int d = 0;
    check(cudaGetDevice(&d), "cudaGetDevice");
    return d;
  }
  void set_current_device(int index) override { check(cudaSetDevice(index), "cudaSetDevice"); }
  Allocator* pinned_host_allocator() override { return &pinned_allocator(); }
  std::shared_ptr<void> copy_beside(const Tensor& src, const Tensor& dst) override {
    return cuda::copy_beside(src, dst);
  }
  void wait_beside(const std::shared_ptr<void>& copy) override { cuda::wait_beside(copy); }
  std::unique_ptr<DeviceGraph> capture_graph(int index, const std::function<void()>& work) override {
    return capture(index, work);
  }
  std::shared_ptr<void> mark_time(int index) override {
    // A graph's events are replayed, not read: nothing is timed while a capture is under way.
    if (capture_in_progress()) return nullptr;
    DeviceGuard guard(Device::cuda(index));
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDefault), "cudaEventCreateWithFlags (profiler)");
    const std::shared_ptr<void> mark(event, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
    check(cudaEventRecord(event, current_stream(index)), "cudaEventRecord (profiler)");
    return mark;
  }
  size_t block_shared_memory(int index) override { return block_shared_bytes(index); }
  double elapsed_ms(const std::shared_ptr<void>& from, const std::shared_ptr<void>& to) override {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from.get()), static_cast<cudaEvent_t>(to.get())),
          "cudaEventElapsedTime (profiler)");
    return ms;
  }

 private:
  std::once_flag probed_;
  int count_ = 0;
  std::string reason_;
};

CudaBackend backend;

size_t bytes_of(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// src (host, contiguous) -> dst (device, contiguous), on the device's stream. From pageable memory
// the runtime stages the data before it returns, so the source may be freed right after; from
// pinned memory (a data loader's batches) the host does not wait at all, and the pinned allocator
// keeps the source from reuse until the copy is done. While the device captures a graph, the copy
// reads a pinned copy that the graph keeps (cuda/graph.h).
void host_to_device(const Tensor& src, const Tensor& dst) {
  KernelContext ctx(dst);
  const void* source = host_source_for_copy(dst.device().index, src);
  count_device_launch(LaunchKind::Memory);
  check(cudaMemcpyAsync(dst.device_raw_data(), source, bytes_of(src), cudaMemcpyHostToDevice, ctx.stream),
        "to(cuda): copying host memory to the device");
}

// src (device) -> dst (host): the host reads the result next, so this waits for the stream, and a
// check that failed in an earlier kernel is reported here.
void device_to_host(const Tensor& src, const Tensor& dst) {
  check_not_capturing("to(cpu)", "the host cannot read a device value while the work is recorded, not run");
  KernelContext ctx(src);
  count_device_launch(LaunchKind::Memory);
  check(cudaMemcpyAsync(dst.raw_data(), src.device_raw_data(), bytes_of(src), cudaMemcpyDeviceToHost, ctx.stream),
        "to(cpu): copying device memory to the host");
  synchronize_device(src.device().index);
}

struct Registration {
  Registration() {
    register_backend(DeviceType::CUDA, &backend);
    to_device_kernel.set(DeviceType::CUDA, host_to_device);
    to_host_kernel.set(DeviceType::CUDA, device_to_host);
    // Every table of the registry's list gets its CUDA kernel (cuda/kernels.h).
#define TS_FILL_CUDA_SLOT(name, Signature, family, serves) name##_kernel.set(DeviceType::CUDA, cuda::name);
    TESSERA_KERNEL_TABLES(TS_FILL_CUDA_SLOT)
#undef TS_FILL_CUDA_SLOT
  }
} registration;

}  // namespace

cudaStream_t current_stream(int device) {
  static auto* streams = new PerDevice<cudaStream_t>;
  return streams->get(device, [device] {
    auto stream = std::make_unique<cudaStream_t>();
    DeviceGuard guard(Device::cuda(device));
    check(cudaStreamCreateWithFlags(stream.get(), cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return stream;
  });
}

void synchronize_device(int device) {
  check_not_capturing("synchronize", "the recorded work has not run; a graph's replay is waited for like a kernel");
  DeviceGuard guard(Device::cuda(device));
  check(cudaStreamSynchronize(current_stream(device)), "synchronize");
  raise_failed_checks(device);
}

}  // namespace tessera::cuda
