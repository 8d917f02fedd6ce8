// The op profiler: where a region of code spends its time, per kernel, like torch.profiler's
// key_averages(). While a Profiler lives on a thread, every kernel called through a KernelTable
// (core/dispatch.h) is timed; calls made during backward are attributed to the autograd node that
// made them ("LinearBackward > matmul"), so forward and backward costs read apart.
//
//   Profiler profiler;
//   Tensor loss = criterion(model->forward(x), y);
//   loss.backward();
//   { ProfileRange range("optimizer"); optimizer.step(); }
//   profiler.stop();
//   std::cout << profiler.table();          // calls, total, mean, share, MACs, GFLOP/s per kernel
//   write_chrome_trace(profiler, "step.json");  // io/chrome_trace.h: a timeline for Perfetto
//
// Kernels on a GPU run asynchronously. By default the profiler times each device kernel call with a
// pair of timing marks (CUDA events) queued around it on the device's stream and read when the
// profiler stops, so the step runs as it does unprofiled: nothing waits for the device in between.
// An op's device time then runs from the moment its stream reaches the first mark to the moment it
// reaches the second; where the GPU waits for the host inside an op, that wait is in the op's time,
// and where it waits between ops, the wait is the "device idle" line of the table. Its host time
// (launching) is kept beside it. DeviceTiming::Synchronize instead waits for the device before and
// after each call (times are each kernel's own, free of queueing, but the step is serialised: small
// ops look larger and the idle share is the host's overhead). Only the profiling thread is seen
// (not the data loader's). MACs are those the ops count for FlopCounter (matmul, linear, conv2d and
// the fused attention kernels), attributed to the kernel call that just ended. Device kernels also
// count what they queue — kernels, library calls, memory operations (core/dispatch.h), each a node
// of a CUDA Graph — and their operand bytes, and a roofline model of an H100 (autograd/roofline.h)
// says how long they would take there at best: on the SIMT emulator those columns are the
// instrument; on a GPU they stand beside the measured times.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/autograd/roofline.h"
#include "tessera/core/dispatch.h"

namespace tessera {

struct KernelEvent {
  int name = 0;                               // Profiler::name(): the kernel table, in backward prefixed by the node
  int phase = 0;                              // Profiler::phase(): "forward", "backward" or a ProfileRange label
  double start_us = 0, duration_us = 0;       // from the profiler's start
  int64_t macs = 0;                           // multiply-accumulates, 0 when not counted
  double host_us = 0;                         // the host's time in the call (launching, on a device)
  bool on_device = false;                     // a GPU's (cuda) kernel, not a CPU one
  int64_t launches = 0;                       // what it queued on the device: kernels + library calls + memory ops
  int64_t library_calls = 0, memory_ops = 0;  // of those (core/dispatch.h)
  int64_t bytes = 0;                          // its and its nested kernel calls' operand bytes (a model)
  int64_t narrowest_element = 0;              // the narrowest operand element, in bytes
};

struct KernelSummary {
  std::string phase, name;
  int64_t calls = 0;
  double total_ms = 0, mean_us = 0;
  double share = 0;  // of the profiled region's wall time
  int64_t macs = 0;
  double gflops = 0;  // 2·MACs per second / 1e9; 0 when not counted
  // Device kernels only (0 on the CPU): launches, operand bytes, and the time the roofline model
  // (autograd/roofline.h, an H100) allows them, beside the measured total_ms.
  int64_t launches = 0, library_calls = 0, memory_ops = 0;
  double host_ms = 0;  // the host's time in the calls
  int64_t bytes = 0;
  double model_ms = 0;       // the sum of each call's roofline time
  RooflineTime model_parts;  // the calls' compute, memory and launch times summed apart
};

// What a profiled region's device kernels add up to (all phases). `launches` counts everything the
// region queued on devices, `outside_calls` the part queued outside any kernel call (none today, but
// an uncounted path would show here rather than vanish): with a CUDA Graph captured of the same
// region, launches equals the graph's nodes.
struct DeviceTotals {
  int64_t calls = 0, bytes = 0, macs = 0;
  LaunchCounts launches;
  int64_t outside_calls = 0;
  double model_ms = 0;
};

// How device kernel calls are timed (see above).
enum class DeviceTiming { Marks, Synchronize };

class Profiler : public KernelObserver {
 public:
  // Starts recording on this thread.
  explicit Profiler(DeviceTiming timing = DeviceTiming::Marks);
  ~Profiler() override;  // stops, if still recording
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Stops recording; device times are read here (after waiting for the devices used).
  void stop();
  double wall_ms() const;  // of the region so far (or until stop)
  const std::vector<KernelEvent>& events() const { return events_; }
  const std::string& name(int id) const { return names_[id]; }
  const std::string& phase(int id) const { return phases_[id]; }

  // One row per (phase, name), largest total first.
  std::vector<KernelSummary> summary() const;
  DeviceTotals device_totals() const;
  // The summary as a text table (at most max_rows rows, 0: all), with per-phase totals and the
  // time outside kernels (autograd bookkeeping, allocation, Python-free but not free).
  std::string table(size_t max_rows = 0) const;

  // FlopCounter::add reports here: the MACs of the kernel call that just ended on this thread.
  static void add_macs(int64_t macs);

  void kernel_begin(const char* op, Device device) override;
  void kernel_end(const char* op, Device device) noexcept override;
  // Every call's operands: a kernel that calls kernels (a copy into a layout a library takes, a
  // reduction's transposed copy) moves their bytes too, and they count towards the outermost call.
  bool wants_operands() const override { return true; }
  void kernel_operands(const OperandTraffic& traffic) noexcept override;

 private:
  friend class ProfileRange;
  int intern(std::vector<std::string>& table, const std::string& text);
  double now_us() const;

  // An event's device time, read at stop(): its marks, and the device's first mark with the host
  // time it was queued at (the device's timeline is placed on the host's from it).
  struct PendingTime {
    size_t event;
    Device device;
    std::shared_ptr<void> begin, end;
  };
  struct DeviceOrigin {
    Device device;
    std::shared_ptr<void> mark;
    double host_us;
  };
  void read_device_times();

  KernelObserver* previous_ = nullptr;
  DeviceTiming timing_;
  bool running_ = false;
  int64_t start_ns_ = 0, stop_ns_ = 0;
  LaunchCounts start_launches_, stop_launches_;
  int depth_ = 0;  // kernels that call kernels: only the outermost call is timed
  double begin_us_ = 0;
  LaunchCounts begin_launches_;
  std::shared_ptr<void> begin_mark_;
  std::vector<PendingTime> pending_;
  std::vector<DeviceOrigin> origins_;
  OperandTraffic traffic_;  // of the outermost kernel call in progress
  std::vector<KernelEvent> events_;
  std::vector<std::string> names_, phases_;
  std::vector<std::string> labels_;  // the open ProfileRanges, innermost last
};

// Labels the kernels called in its scope outside backward ("optimizer", "data"), as
// torch.profiler.record_function does; without one they count as "forward".
class ProfileRange {
 public:
  explicit ProfileRange(std::string label);
  ~ProfileRange();
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;

 private:
  Profiler* profiler_;
};

}  // namespace tessera
