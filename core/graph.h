// Device work recorded once and replayed: CUDA Graphs, behind a backend-neutral interface (core/
// knows no backend; the CUDA backend implements DeviceBackend::capture_graph).
//
// A training step queues a few thousand kernels; on a GPU each launch costs the host several
// microseconds, so a step of small kernels is bound by the host, not the device. Captured once, the
// same step is one graph launch. What a graph freezes, and how Tessera copes (docs/cuda.md, CUDA
// Graphs):
//   - kernel arguments: per-step values (learning rate, update count) must live in device memory
//     that the host rewrites before each replay (train::Optimizer::set_capturable);
//   - addresses: inputs are copied into the same tensors before each replay (static inputs), and
//     the memory the capture allocated comes from a pool private to the graph, so nothing else is
//     ever placed where a replay writes;
//   - host reads: none may happen while capturing (no item(), no synchronisation);
//   - random numbers: a kernel captured with a Philox seed and offset would draw the same numbers
//     at every replay, so inside a capture a draw reads them from device memory that the host
//     rewrites before each replay (before_each_replay; Generator, ops/creation.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "tessera/core/device.h"
#include "tessera/core/error.h"

namespace tessera {

class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Queues the recorded work on the device's stream, as one launch.
  virtual void replay() = 0;
  // Kernels, copies and library calls the graph holds.
  virtual int64_t nodes() const = 0;
};

// Why a capture failed (the work did something a graph cannot hold). Nothing the work queued has
// run: a caller that falls back to running the work eagerly loses nothing on the device, and the
// host state the work changed while recorded is the caller's to restore.
class CaptureError : public Error {
 public:
  using Error::Error;
};

// Runs `work` with `device`'s stream capturing: every kernel, copy and library call it queues is
// recorded into the returned graph, not run. Throws CaptureError when the device cannot capture
// (the CPU) or the work did something a capture forbids; an error the work itself throws passes
// through as it is, the capture abandoned.
std::unique_ptr<DeviceGraph> capture_graph(Device device, const std::function<void()>& work);

// True while some device is capturing on this process: a host read of a device value, a
// synchronisation or a random draw now would be wrong, and the functions that make them throw.
bool capture_in_progress();
// While capturing: `before` runs on the host before each replay of the graph being captured, to
// rewrite the device values that the graph reads (a random stream's seed and offset). The functions
// run in the order they were added, and are destroyed with the graph, before its memory.
void before_each_replay(std::function<void()> before);
// Names the capture under way (0 when none): a value kept per capture is renewed when this changes.
uint64_t capture_id();

// While one lives, allocations on a capturing device come from the device's ordinary memory, not
// the graph's pool. For device values that the host rewrites before each replay: a block of the
// pool may be one that a kernel recorded earlier in the capture writes again at every replay.
class AllocateOutsideGraph {
 public:
  AllocateOutsideGraph();
  ~AllocateOutsideGraph();
  AllocateOutsideGraph(const AllocateOutsideGraph&) = delete;
  AllocateOutsideGraph& operator=(const AllocateOutsideGraph&) = delete;
};
// True while an AllocateOutsideGraph lives (read by the backend's allocator).
bool allocating_outside_graph();
// Throws CaptureError "<what> inside a CUDA Graph capture: <why>" while a capture is in progress.
void check_not_capturing(const char* what, const char* why);

namespace detail {
// Kept by the backend that captures (it marks the start and the end of each capture).
void set_capture_in_progress(bool on);
}  // namespace detail

}  // namespace tessera
