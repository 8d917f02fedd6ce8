#include "tessera/core/graph.h"

#include <atomic>
#include <vector>

#include "tessera/core/backend.h"

namespace tessera {

namespace {
std::atomic<int> captures{0};

// What capture_graph gathers while its work runs (captures do not nest).
struct Recording {
  uint64_t id = 0;
  std::vector<std::function<void()>> before_replay;
};
Recording* recording = nullptr;
uint64_t last_capture_id = 0;
int outside_graph = 0;  // live AllocateOutsideGraph guards

// A backend's graph with host work run before each replay.
class GraphWithPrologue final : public DeviceGraph {
 public:
  GraphWithPrologue(std::unique_ptr<DeviceGraph> graph, std::vector<std::function<void()>> before)
      : graph_(std::move(graph)), before_(std::move(before)) {}
  void replay() override {
    for (const auto& f : before_) f();
    graph_->replay();
  }
  int64_t nodes() const override { return graph_->nodes(); }

 private:
  std::unique_ptr<DeviceGraph> graph_;
  std::vector<std::function<void()>> before_;  // declared last: destroyed first, the graph's memory still held
};
}  // namespace

std::unique_ptr<DeviceGraph> capture_graph(Device device, const std::function<void()>& work) {
  if (device.is_cpu())
    throw CaptureError("capture_graph: the cpu has no graphs to capture (CUDA Graphs need a cuda device)");
  if (recording) throw CaptureError("capture_graph: a capture is already under way (captures do not nest)");
  Recording r{++last_capture_id, {}};
  recording = &r;
  std::unique_ptr<DeviceGraph> graph;
  try {
    graph = backend_for(device).capture_graph(device.index, work);
  } catch (...) {
    recording = nullptr;
    throw;
  }
  recording = nullptr;
  if (r.before_replay.empty()) return graph;
  return std::make_unique<GraphWithPrologue>(std::move(graph), std::move(r.before_replay));
}

void before_each_replay(std::function<void()> before) {
  TS_CHECK(recording, "before_each_replay: no CUDA Graph capture is under way");
  recording->before_replay.push_back(std::move(before));
}

uint64_t capture_id() { return recording ? recording->id : 0; }

AllocateOutsideGraph::AllocateOutsideGraph() { ++outside_graph; }
AllocateOutsideGraph::~AllocateOutsideGraph() { --outside_graph; }
bool allocating_outside_graph() { return outside_graph > 0; }

bool capture_in_progress() { return captures.load(std::memory_order_relaxed) > 0; }

void check_not_capturing(const char* what, const char* why) {
  if (capture_in_progress()) throw CaptureError(detail::concat(what, " inside a CUDA Graph capture: ", why));
}

namespace detail {
void set_capture_in_progress(bool on) { captures.fetch_add(on ? 1 : -1, std::memory_order_relaxed); }
}  // namespace detail

}  // namespace tessera
