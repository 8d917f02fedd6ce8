// Copies beside a device's work (ops/upload.h): a second stream per device on which host-to-device
// copies run while the kernels queued on the device's own stream compute, ordered with it by events
// both ways (PyTorch's data prefetchers do the same with a side stream and wait_stream):
//   - the destination was allocated from the device stream's pool (core/allocator.h), where a
//     block is reused once the work queued before it no longer needs it; so the copy first waits
//     for an event recorded on the device's stream at the start;
//   - the device's stream waits for an event recorded after the copy before it uses the result
//     (wait_beside), and only then does the Upload release its pinned source, whose reuse the
//     pinned allocator orders after the device's own stream.
#include <memory>

#include "tessera/core/dispatch.h"
#include "tessera/core/error.h"
#include "tessera/core/graph.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/per_device.h"

namespace tessera::cuda {

namespace {

// Created after the device's own stream (the emulator runs a device's first stream's work at once
// and holds back the others': cuda/emu/cuda_runtime.h).
cudaStream_t side_stream(int device) {
  static auto* streams = new PerDevice<cudaStream_t>;
  return streams->get(device, [device] {
    current_stream(device);
    auto stream = std::make_unique<cudaStream_t>();
    check(cudaStreamCreateWithFlags(stream.get(), cudaStreamNonBlocking), "cudaStreamCreateWithFlags (side stream)");
    return stream;
  });
}

cudaEvent_t recorded_event(cudaStream_t stream) {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags (side stream)");
  check(cudaEventRecord(e, stream), "cudaEventRecord (side stream)");
  return e;
}

struct SideCopy {
  int device = 0;
  cudaEvent_t done = nullptr;  // recorded on the side stream after the copy
  SideCopy(const SideCopy&) = delete;
  SideCopy& operator=(const SideCopy&) = delete;
  SideCopy() = default;
  ~SideCopy() {
    if (done) cudaEventDestroy(done);  // (CUDA frees it once the copy has completed)
  }
};

}  // namespace

std::shared_ptr<void> copy_beside(const Tensor& src, const Tensor& dst) {
  check_not_capturing("a copy beside the device's work (Upload)",
                      "a graph replays the work of one stream; copy the inputs in before the capture");
  const int d = dst.device().index;
  DeviceGuard guard(dst.device());
  const cudaStream_t side = side_stream(d);
  const cudaEvent_t before = recorded_event(current_stream(d));
  check(cudaStreamWaitEvent(side, before, 0), "cudaStreamWaitEvent (side stream after the device's)");
  cudaEventDestroy(before);  // (the wait keeps what it needs)
  count_device_launch(LaunchKind::Memory);
  check(cudaMemcpyAsync(dst.device_raw_data(), src.raw_data(), static_cast<size_t>(src.numel()) * src.element_size(),
                        cudaMemcpyHostToDevice, side),
        "Upload: copying host memory to the device on the side stream");
  auto copy = std::make_shared<SideCopy>();
  copy->device = d;
  copy->done = recorded_event(side);
  return copy;
}

void wait_beside(const std::shared_ptr<void>& token) {
  const auto* copy = static_cast<const SideCopy*>(token.get());
  DeviceGuard guard(Device::cuda(copy->device));
  check(cudaStreamWaitEvent(current_stream(copy->device), copy->done, 0),
        "cudaStreamWaitEvent (the device's stream after a side-stream copy)");
}

}  // namespace tessera::cuda
