// Kernel timing for autograd/profiler.h.
#include "tessera/autograd/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <utility>

#include "tessera/autograd/engine.h"
#include "tessera/autograd/node.h"
#include "tessera/core/autocast.h"
#include "tessera/core/backend.h"

namespace tessera {

namespace {

constinit thread_local Profiler* active_profiler = nullptr;

// printf into a string of whatever length the values need.
template <class... Args>
std::string format(const char* pattern, Args... args) {
  const int size = std::snprintf(nullptr, 0, pattern, args...);
  std::string text(static_cast<size_t>(std::max(size, 0)), '\0');
  std::snprintf(text.data(), text.size() + 1, pattern, args...);
  return text;
}

// The H100 roofline's time for one device kernel call (FLOPs: 2 per counted multiply-accumulate).
RooflineTime event_model(const KernelEvent& e, bool tf32) {
  return roofline(h100_sxm(), 2.0 * static_cast<double>(e.macs), static_cast<double>(e.bytes), e.launches,
                  e.narrowest_element, tf32);
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Profiler::Profiler(DeviceTiming timing)
    : previous_(KernelObserver::install(this)),
      timing_(timing),
      running_(true),
      start_ns_(steady_ns()),
      start_launches_(device_launch_counts()) {
  events_.reserve(4096);
  active_profiler = this;
}

Profiler::~Profiler() {
  try {
    stop();
  } catch (...) {
    // A device error while reading the times: the caller's own synchronisation reports it.
  }
}

void Profiler::stop() {
  if (!running_) return;
  running_ = false;
  KernelObserver::install(previous_);
  active_profiler = nullptr;
  stop_launches_ = device_launch_counts();
  read_device_times();  // waits for the devices: the region ends when their work does
  stop_ns_ = steady_ns();
}

void Profiler::read_device_times() {
  std::vector<Device> devices;
  for (const DeviceOrigin& o : origins_) devices.push_back(o.device);
  for (const Device& d : devices) synchronize(d);
  for (const PendingTime& p : pending_) {
    const DeviceOrigin* origin = nullptr;
    for (const DeviceOrigin& o : origins_)
      if (o.device == p.device) origin = &o;
    DeviceBackend& backend = backend_for(p.device);
    KernelEvent& e = events_[p.event];
    e.duration_us = backend.elapsed_ms(p.begin, p.end) * 1e3;
    e.start_us = origin->host_us + backend.elapsed_ms(origin->mark, p.begin) * 1e3;
  }
  pending_.clear();
  origins_.clear();
}

double Profiler::now_us() const { return static_cast<double>(steady_ns() - start_ns_) / 1e3; }

double Profiler::wall_ms() const { return static_cast<double>((running_ ? steady_ns() : stop_ns_) - start_ns_) / 1e6; }

int Profiler::intern(std::vector<std::string>& table, const std::string& text) {
  // Few distinct names (tens), so a linear search beats hashing.
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i] == text) return static_cast<int>(i);
  table.push_back(text);
  return static_cast<int>(table.size() - 1);
}

void Profiler::kernel_begin(const char* op, Device device) {
  if (depth_++ > 0) return;
  traffic_ = {};
  begin_mark_ = nullptr;
  if (!device.is_cpu()) {
    // Synchronising: earlier asynchronous work must not be charged to this kernel.
    if (timing_ == DeviceTiming::Synchronize) synchronize(device);
    else begin_mark_ = backend_for(device).mark_time(device.index);
  }
  begin_launches_ = device_launch_counts();
  begin_us_ = now_us();
}

void Profiler::kernel_operands(const OperandTraffic& traffic) noexcept {
  if (depth_ == 1) {
    traffic_ = traffic;
    return;
  }
  traffic_.bytes += traffic.bytes;
  if (traffic_.narrowest_element == 0 ||
      (traffic.narrowest_element > 0 && traffic.narrowest_element < traffic_.narrowest_element))
    traffic_.narrowest_element = traffic.narrowest_element;
}

void Profiler::kernel_end(const char* op, Device device) noexcept {
  if (--depth_ > 0) return;
  try {
    const LaunchCounts launched = device_launch_counts() - begin_launches_;
    std::shared_ptr<void> end_mark;
    if (!device.is_cpu()) {
      if (timing_ == DeviceTiming::Synchronize) synchronize(device);
      else if (begin_mark_) end_mark = backend_for(device).mark_time(device.index);
    }
    KernelEvent e;
    e.start_us = begin_us_;
    e.duration_us = e.host_us = now_us() - begin_us_;
    e.on_device = !device.is_cpu();
    e.launches = launched.total();
    e.library_calls = launched.library_calls;
    e.memory_ops = launched.memory_ops;
    e.bytes = traffic_.bytes;
    e.narrowest_element = traffic_.narrowest_element;
    std::string name = op;
    if (autograd::in_backward()) {
      const autograd::Node* node = autograd::current_backward_node();
      name = (node != nullptr ? node->name() : std::string("gradient accumulation")) + " > " + name;
      e.phase = intern(phases_, "backward");
    } else {
      e.phase = intern(phases_, labels_.empty() ? std::string("forward") : labels_.back());
    }
    e.name = intern(names_, name);
    if (end_mark) {
      bool known = false;
      for (const DeviceOrigin& o : origins_) known = known || o.device == device;
      if (!known) origins_.push_back({device, begin_mark_, begin_us_});
      pending_.push_back({events_.size(), device, std::move(begin_mark_), std::move(end_mark)});
    }
    events_.push_back(e);
  } catch (...) {
    // Out of memory while recording: the event is lost, the program goes on.
  }
}

void Profiler::add_macs(int64_t macs) {
  if (active_profiler != nullptr && !active_profiler->events_.empty() && active_profiler->depth_ == 0)
    active_profiler->events_.back().macs += macs;
}

std::vector<KernelSummary> Profiler::summary() const {
  std::map<std::pair<int, int>, KernelSummary> rows;
  const bool tf32 = allow_tf32();
  for (const KernelEvent& e : events_) {
    KernelSummary& r = rows[{e.phase, e.name}];
    ++r.calls;
    r.total_ms += e.duration_us / 1e3;
    r.macs += e.macs;
    if (e.on_device) {
      r.launches += e.launches;
      r.library_calls += e.library_calls;
      r.memory_ops += e.memory_ops;
      r.host_ms += e.host_us / 1e3;
      r.bytes += e.bytes;
      const RooflineTime t = event_model(e, tf32);
      r.model_ms += t.total_us() / 1e3;
      r.model_parts += t;
    }
  }
  const double wall = wall_ms();
  std::vector<KernelSummary> out;
  for (auto& [key, r] : rows) {
    r.phase = phases_[key.first];
    r.name = names_[key.second];
    r.mean_us = r.total_ms * 1e3 / static_cast<double>(r.calls);
    r.share = wall > 0 ? r.total_ms / wall : 0;
    r.gflops = r.total_ms > 0 ? 2.0 * static_cast<double>(r.macs) / (r.total_ms * 1e6) : 0;
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelSummary& a, const KernelSummary& b) { return a.total_ms > b.total_ms; });
  return out;
}

DeviceTotals Profiler::device_totals() const {
  DeviceTotals totals;
  const bool tf32 = allow_tf32();
  int64_t in_calls = 0;
  for (const KernelEvent& e : events_) {
    if (!e.on_device) continue;
    ++totals.calls;
    in_calls += e.launches;
    totals.bytes += e.bytes;
    totals.macs += e.macs;
    totals.model_ms += event_model(e, tf32).total_us() / 1e3;
  }
  totals.launches = (running_ ? device_launch_counts() : stop_launches_) - start_launches_;
  totals.outside_calls = totals.launches.total() - in_calls;
  return totals;
}

std::string Profiler::table(size_t max_rows) const {
  const std::vector<KernelSummary> rows = summary();
  const DeviceTotals device = device_totals();
  // Device kernels add their launches, operand megabytes and the H100 roofline's milliseconds.
  const bool on_device = device.calls > 0;
  std::string out = format("%-9s %-44s %7s %10s %10s %7s %10s %9s", "phase", "kernel", "calls", "total ms", "mean us",
                           "share", "GMACs", "GFLOP/s");
  if (on_device) out += format(" %8s %10s %9s", "launches", "MB", "model ms");
  out += "\n";
  std::map<std::string, double> phase_ms;
  double kernel_ms = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const KernelSummary& r = rows[i];
    phase_ms[r.phase] += r.total_ms;
    kernel_ms += r.total_ms;
    if (max_rows != 0 && i >= max_rows) continue;
    std::string name = r.name.size() > 44 ? r.name.substr(0, 41) + "..." : r.name;
    const std::string macs = r.macs > 0 ? format("%.3f", static_cast<double>(r.macs) / 1e9) : "-";
    const std::string gflops = r.macs > 0 ? format("%.1f", r.gflops) : "-";
    out += format("%-9s %-44s %7lld %10.2f %10.1f %6.1f%% %10s %9s", r.phase.c_str(), name.c_str(),
                  static_cast<long long>(r.calls), r.total_ms, r.mean_us, 100 * r.share, macs.c_str(), gflops.c_str());
    if (on_device)
      out += format(" %8lld %10.2f %9.3f", static_cast<long long>(r.launches), static_cast<double>(r.bytes) / 1e6,
                    r.model_ms);
    out += "\n";
  }
  // GCC 12 at -O3: a false -Wrestrict overlap inside std::string's insert when a literal is
  // prepended to a temporary string (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
  if (max_rows != 0 && rows.size() > max_rows) out += "(" + std::to_string(rows.size() - max_rows) + " more rows)\n";
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  const double wall = wall_ms();
  for (const auto& [phase, ms] : phase_ms) {
    out += format("%-9s %-44s %7s %10.2f %10s %6.1f%%\n", phase.c_str(), "(all kernels)", "", ms, "",
                  wall > 0 ? 100 * ms / wall : 0.0);
  }
  out += format("%-9s %-44s %7s %10.2f %10s %6.1f%%\n", "", "outside kernels", "", wall - kernel_ms, "",
                wall > 0 ? 100 * (wall - kernel_ms) / wall : 0.0);
  out += format("%-9s %-44s %7s %10.2f\n", "", "profiled region (wall)", "", wall);
  if (on_device) {
    out += format(
        "device kernels: %lld calls queued %lld (%lld kernels, %lld library calls, %lld memory ops; %lld outside "
        "kernel calls), %.1f MB of operands, %.2f GFLOP; %s roofline: %.3f ms (a model, not a measurement)\n",
        static_cast<long long>(device.calls), static_cast<long long>(device.launches.total()),
        static_cast<long long>(device.launches.kernels), static_cast<long long>(device.launches.library_calls),
        static_cast<long long>(device.launches.memory_ops), static_cast<long long>(device.outside_calls),
        static_cast<double>(device.bytes) / 1e6, 2.0 * static_cast<double>(device.macs) / 1e9, h100_sxm().name,
        device.model_ms);
  }
  return out;
}

ProfileRange::ProfileRange(std::string label) : profiler_(active_profiler) {
  if (profiler_ != nullptr) profiler_->labels_.push_back(std::move(label));
}

ProfileRange::~ProfileRange() {
  if (profiler_ != nullptr && !profiler_->labels_.empty()) profiler_->labels_.pop_back();
}

}  // namespace tessera
