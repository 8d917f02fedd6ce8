#include "tessera/core/graph.h"

#include <atomic>

#include "tessera/core/backend.h"

namespace tessera {

namespace {
std::atomic<int> captures{0};
}  // namespace

std::unique_ptr<DeviceGraph> capture_graph(Device device, const std::function<void()>& work) {
  if (device.is_cpu())
    throw CaptureError("capture_graph: the cpu has no graphs to capture (CUDA Graphs need a cuda device)");
  return backend_for(device).capture_graph(device.index, work);
}

bool capture_in_progress() { return captures.load(std::memory_order_relaxed) > 0; }

void check_not_capturing(const char* what, const char* why) {
  if (capture_in_progress()) throw CaptureError(detail::concat(what, " inside a CUDA Graph capture: ", why));
}

namespace detail {
void set_capture_in_progress(bool on) { captures.fetch_add(on ? 1 : -1, std::memory_order_relaxed); }
}  // namespace detail

}  // namespace tessera
