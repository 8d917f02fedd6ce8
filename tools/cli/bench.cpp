// `tessera bench`: images/s and peak memory of a model, in inference (eval mode, no graph) or a
// full training step (forward, cross-entropy, backward, SGD update), on random inputs, on the
// --device the model is built for. Warm-up steps run first and are not timed; then steps run until
// both --steps and --seconds are reached (on a GPU each step is waited for before the clock is read).
// bench/bench_models.py measures timm on PyTorch the same way, so the two can be compared.
#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "tessera/core/cpu_features.h"
#include "tessera/core/backend.h"
#include "tessera/core/graph.h"
#include "tessera/core/levers.h"
#include "tessera/core/parallel.h"
#include "tessera/core/process_memory.h"
#include "tessera/io/chrome_trace.h"
#include "tessera/io/json.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/optim.h"
#include "tessera/autograd/profiler.h"
#include "tessera/autograd/roofline.h"
#include "tools/cli/args.h"
#include "tools/cli/image_input.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/precision_flags.h"
#include "tools/cli/train_options.h"

namespace tessera::cli {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Measurements to the digits they mean (the JSON writer prints a double's every digit).
double rounded(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

// One step of the chosen mode; the SGD update keeps the optimizer's memory traffic in the step
// as timm's benchmark.py does (its default --opt is sgd), as one multi-tensor step over every
// parameter (torch's foreach SGD): one launch on a GPU, not one per parameter.
// Under autocast the weights are cast ahead of each forward pass as in training (ops/autocast_weights.h).
void run_step(models::Model& model, const Tensor& images, const Tensor& labels, bool train, std::optional<DType> amp,
              AutocastWeights& weight_casts) {
  std::optional<AutocastGuard> autocast;
  if (amp) autocast.emplace(images.device().type, *amp);
  std::optional<NoGradGuard> inference;  // not even the weights' casts are recorded
  if (!train) inference.emplace();
  std::optional<AutocastWeights::Pass> weights(std::in_place, weight_casts, images.device());
  if (!train) {
    model.forward(images);
    return;
  }
  Tensor loss = cross_entropy(model.forward(images), labels);
  weights.reset();
  autocast.reset();  // backward and the update in float32 master weights, as timm does
  loss.backward();
  ProfileRange range("update");
  NoGradGuard no_grad;
  std::vector<Tensor> params, grads, no_momentum;
  for (const Tensor& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    params.push_back(p);
    grads.push_back(p.grad());
  }
  SgdConfig sgd;
  sgd.lr = 1e-4;
  sgd.momentum = 0;
  if (!params.empty()) sgd_update_(params, grads, no_momentum, sgd, false);
  model.zero_grad();
}

ArgParser bench_parser() {
  ArgParser p("bench", "Measure a model's images/s and peak memory for inference or a training step.");
  add_model_options(p);
  p.option("--batch", "B", "images per step", "8", "-b");
  p.option("--mode", "MODE", "infer (eval, no graph) or train (forward + backward + update)", "infer");
  p.option("--warmup", "N", "untimed steps first", "2");
  p.option("--steps", "N", "at least this many timed steps", "5");
  p.option("--seconds", "S", "and at least this long", "5");
  add_threads_option(p);
  p.flag("--json", "print one JSON object (images_per_s, peak_memory_mib, ...)");
  p.flag("--profile", "after the timed steps, profile more: time per kernel, forward and backward apart");
  p.option("--profile-steps", "N", "steps the profile covers (with --profile or --trace)", "1");
  p.option("--lever-sweep", "VARS",
           "after the timed steps, time the step again with each of these speed levers flipped alone (comma-separated "
           "environment variables of core/levers.h, e.g. TESSERA_GEMM_BATCH_COPY), then with all as set once more; "
           "in one process, eager steps",
           "");
  p.flag("--profile-sync",
         "time each device kernel call by waiting for the device around it (serialises the step) instead of by "
         "events read at the end");
  p.option("--trace", "FILE.json", "write the profiled steps as a Chrome trace (open in ui.perfetto.dev)");
  add_precision_options(p);
  add_train_step_options(p);
  return p;
}

// The flags bench reads, checked before anything is built.
struct BenchSettings {
  std::string mode;  // infer or train
  bool train = false;
  int64_t batch = 0, warmup = 0, steps = 0, profile_steps = 0;
  double seconds = 0;
  bool cuda_graph = false;
  std::vector<const LeverInfo*> sweep_levers;
  Precision precision;
};

// --lever-sweep's rows of core/levers.h, by variable name.
std::vector<const LeverInfo*> levers_to_sweep(const std::string& names) {
  std::vector<const LeverInfo*> out;
  const auto& table = lever_table();
  for (const std::string& name : split_list(names)) {
    const auto row = std::find_if(table.begin(), table.end(), [&](const LeverInfo& l) { return name == l.variable; });
    if (row == table.end()) throw UsageError("option --lever-sweep: '" + name + "' is not a lever of core/levers.h");
    out.push_back(&*row);
  }
  return out;
}

BenchSettings bench_settings(const ArgParser& p) {
  BenchSettings s;
  s.mode = p.get("--mode");
  if (s.mode != "infer" && s.mode != "train")
    throw UsageError("option --mode: expected infer or train, got '" + s.mode + "'");
  s.train = s.mode == "train";
  s.batch = p.get_int("--batch");
  s.warmup = p.get_int("--warmup");
  s.steps = p.get_int("--steps");
  if (s.batch <= 0 || s.warmup < 0 || s.steps <= 0)
    throw UsageError(detail::concat("options --batch and --steps must be positive and --warmup >= 0, got ", s.batch,
                                    ", ", s.steps, " and ", s.warmup));
  s.profile_steps = p.get_int("--profile-steps");
  if (s.profile_steps <= 0)
    throw UsageError(
        detail::concat("option --profile-steps: expected a positive count, got ", p.get("--profile-steps")));
  s.cuda_graph = p.is_set("--cuda-graph");
  if (s.cuda_graph && s.warmup < 1)
    throw UsageError("option --cuda-graph: the step is captured after the warm-up steps; give --warmup 1 or more");
  s.seconds = p.get_double("--seconds");
  s.sweep_levers = levers_to_sweep(p.get("--lever-sweep"));
  s.precision = precision_options(p);
  return s;
}

// The model and the random batch it is timed on.
struct Workload {
  int64_t img = 0;  // the resolution the model is built for
  std::shared_ptr<models::Model> model;
  Device device;
  bool train;
  std::optional<DType> amp;
  Tensor images, labels;
  int64_t macs = 0;              // of one forward pass of the batch, as the papers count (autograd/flop_counter.h)
  AutocastWeights weight_casts;  // the first step learns which weights to cast ahead

  Workload(const ArgParser& p, const BenchSettings& s)
      : model(build_model(p, &img)), device(model->device()), train(s.train), amp(s.precision.amp) {
    model->grad_checkpointing = p.is_set("--grad-checkpointing");
    model->train(train);
    Generator gen(0);
    images = randn({s.batch, model->in_chans, img, img}, DType::Float32, &gen, device);
    std::vector<int64_t> label_values(s.batch);
    for (int64_t i = 0; i < s.batch; ++i) label_values[i] = i % model->num_classes;
    labels = from_vector(label_values, {s.batch}).to(device);
    NoGradGuard no_grad;
    FlopCounter counter;
    model->forward(images);
    macs = counter.macs();
  }
  void step() { run_step(*model, images, labels, train, amp, weight_casts); }
};

// --cuda-graph: the step recorded once (the warm-up filled the algorithm caches and the allocator),
// then each timed step is one replay; where it cannot be captured, steps run eagerly.
struct StepGraph {
  std::unique_ptr<DeviceGraph> graph;  // null: eager steps
  std::string fallback;                // why it could not be captured
};

StepGraph capture_step(Workload& w) {
  StepGraph g;
  try {
    g.graph = capture_graph(w.device, [&] { w.step(); });
  } catch (const CaptureError& e) {
    g.fallback = e.what();
    std::fprintf(stderr, "--cuda-graph: the step cannot be captured, so it runs eagerly: %s\n", e.what());
  }
  return g;
}

struct Timed {
  int64_t steps = 0;
  double seconds = 0;
};

// Steps until both --steps and --seconds are reached, each waited for.
Timed time_steps(const std::function<void()>& one, const Device& device, const BenchSettings& s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Timed t;
  while (t.steps < s.steps || t.seconds < s.seconds) {
    one();
    synchronize(device);
    ++t.steps;
    t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return t;
}

struct SweepRun {
  std::string lever;
  double images_per_s;
};

// --lever-sweep: the eager step with each lever flipped alone, then as set again (the drift check).
std::vector<SweepRun> sweep_levers(Workload& w, const BenchSettings& s) {
  std::vector<SweepRun> sweep;
  if (s.sweep_levers.empty()) return sweep;
  const auto timed_eager = [&] {
    for (int64_t i = 0; i < std::max<int64_t>(s.warmup, 1); ++i) w.step();
    const Timed t = time_steps([&] { w.step(); }, w.device, s);
    return static_cast<double>(t.steps * s.batch) / t.seconds;
  };
  sweep.push_back({"as set", timed_eager()});
  for (const LeverInfo* row : s.sweep_levers) {
    const bool flipped = !(levers().*(row->field));
    ScopedLever lever(row->field, flipped);
    sweep.push_back({std::string(row->variable) + (flipped ? "=1" : "=0"), timed_eager()});
  }
  sweep.push_back({"as set, again", timed_eager()});
  return sweep;
}

// --profile / --trace: more steps, profiled after the timed ones so that the timing is the
// unobserved one; eager even with --cuda-graph (a replay is one launch, and the profile breaks down
// what it holds).
void profile_steps(Workload& w, const ArgParser& p, const BenchSettings& s, std::optional<Profiler>& profiler) {
  if (!p.is_set("--profile") && p.get("--trace").empty()) return;
  profiler.emplace(p.is_set("--profile-sync") ? DeviceTiming::Synchronize : DeviceTiming::Marks);
  for (int64_t i = 0; i < s.profile_steps; ++i) w.step();
  synchronize(w.device);
  profiler->stop();
  if (!p.get("--trace").empty()) write_chrome_trace(*profiler, p.get("--trace"));
}

// Memory in MiB: the process's resident peak and what it held before the timed steps, the peak of
// the device's tensors and the part of it the steps added, and what the caching allocator held at
// its peak (the tensors plus its cache's slack).
struct Memory {
  double rss_before = 0, peak_rss = 0, tensor_peak = 0, step_tensors = 0, reserved_peak = 0;
  int64_t tensors_before = 0;  // bytes of the device's tensors when the timed steps start
};

// What the measurements start from; the device's peak is reset.
Memory memory_before_steps(const Device& device) {
  Memory m;
  m.rss_before = static_cast<double>(resident_bytes()) / kMiB;
  reset_peak_memory(device.type);
  m.tensors_before = memory_stats(device.type).allocated_bytes;
  return m;
}

Memory memory_after_steps(Memory m, const Device& device) {
  m.peak_rss = peak_resident_bytes() / kMiB;
  m.tensor_peak = memory_stats(device.type).peak_bytes / kMiB;
  m.step_tensors = (memory_stats(device.type).peak_bytes - m.tensors_before) / kMiB;
  m.reserved_peak = static_cast<double>(allocator_stats(device).peak_reserved_bytes) / kMiB;
  return m;
}

// Everything a run measured.
struct BenchResult {
  Timed timed;
  double images_per_s = 0;
  double tflops = 0;
  StepGraph graph;
  std::vector<SweepRun> sweep;
  std::optional<Profiler> profiler;
  Memory memory;
};

void write_profile_json(json::Writer& w, const Profiler& profiler, const Device& device) {
  w.key("profile").begin_array();
  for (const KernelSummary& r : profiler.summary()) {
    w.begin_object().key("phase").value(r.phase).key("kernel").value(r.name).key("calls").value(r.calls);
    w.key("total_ms").value(rounded(r.total_ms, 3)).key("share").value(rounded(r.share, 4));
    w.key("macs").value(r.macs).key("gflops").value(rounded(r.gflops, 1));
    if (!device.is_cpu()) {
      w.key("launches").value(r.launches).key("library_calls").value(r.library_calls);
      w.key("memory_ops").value(r.memory_ops).key("host_ms").value(rounded(r.host_ms, 3));
      w.key("bytes").value(r.bytes);
      w.key("model_ms").value(rounded(r.model_ms, 4));
      // Its parts, for extrapolating to other batch sizes (bench/roofline.py).
      w.key("model_compute_ms").value(rounded(r.model_parts.compute_us / 1e3, 5));
      w.key("model_memory_ms").value(rounded(r.model_parts.memory_us / 1e3, 5));
      w.key("model_launch_ms").value(rounded(r.model_parts.launch_us / 1e3, 5));
    }
    w.end_object();
  }
  w.end_array().key("profile_wall_ms").value(rounded(profiler.wall_ms(), 3));
}

// Per profiled step: the instrument that needs no GPU (autograd/roofline.h, a model).
void write_device_per_step_json(json::Writer& w, const Profiler& profiler, int64_t profiled, bool synchronized) {
  const DeviceTotals t = profiler.device_totals();
  const double steps_profiled = static_cast<double>(profiled);
  w.key("device_per_step").begin_object();
  const auto per_step = [&](int64_t v) { return rounded(static_cast<double>(v) / steps_profiled, 1); };
  w.key("kernel_calls").value(per_step(t.calls));
  // What a step queues on the device, each a node of a CUDA Graph of the step: compare with
  // cuda_graph.nodes of --cuda-graph --json.
  w.key("launches").value(per_step(t.launches.total())).key("kernels").value(per_step(t.launches.kernels));
  w.key("library_calls").value(per_step(t.launches.library_calls));
  w.key("memory_ops").value(per_step(t.launches.memory_ops));
  w.key("outside_kernel_calls").value(per_step(t.outside_calls));
  w.key("timing").value(synchronized ? "synchronize" : "events");
  w.key("bytes").value(rounded(static_cast<double>(t.bytes) / steps_profiled, 0));
  w.key("flops").value(rounded(2.0 * static_cast<double>(t.macs) / steps_profiled, 0));
  w.key("roofline_ms").value(rounded(t.model_ms / steps_profiled, 4)).key("roofline_gpu").value(h100_sxm().name);
  w.end_object();
}

void print_json(const ArgParser& p, const BenchSettings& s, const Workload& b, const BenchResult& m) {
  json::Writer w;
  w.begin_object().key("model").value(p.get("--model")).key("device").value(b.device.str()).key("mode").value(s.mode);
  w.key("batch").value(s.batch).key("img_size").value(b.img).key("threads").value(get_num_threads());
  w.key("precision").value(precision_name(s.precision.amp));
  w.key("instruction_set").value(instruction_set(b.device, s.precision.amp == DType::BFloat16));
  if (b.device.is_cpu()) w.key("cpu").value(cpu_description());
  w.key("steps").value(m.timed.steps).key("seconds").value(rounded(m.timed.seconds, 3));
  w.key("images_per_s").value(rounded(m.images_per_s, 3));
  w.key("peak_memory_mib")
      .value(rounded(m.memory.peak_rss, 1))
      .key("rss_before_mib")
      .value(rounded(m.memory.rss_before, 1));
  w.key("tensor_peak_mib").value(rounded(m.memory.tensor_peak, 1));
  w.key("step_tensor_peak_mib").value(rounded(m.memory.step_tensors, 1));
  w.key("reserved_peak_mib").value(rounded(m.memory.reserved_peak, 1));
  w.key("macs_per_image").value(b.macs / s.batch).key("achieved_tflops").value(rounded(m.tflops, 4));
  if (s.cuda_graph) {
    // Launches per step with the graph: one; the graph's nodes are what the eager step launches.
    w.key("cuda_graph").begin_object().key("captured").value(m.graph.graph != nullptr);
    if (m.graph.graph) w.key("nodes").value(m.graph.graph->nodes()).key("launches_per_step").value(int64_t{1});
    else w.key("fallback").value(m.graph.fallback);
    w.end_object();
  }
  if (m.profiler && p.is_set("--profile")) {
    write_profile_json(w, *m.profiler, b.device);
    if (!b.device.is_cpu()) write_device_per_step_json(w, *m.profiler, s.profile_steps, p.is_set("--profile-sync"));
  }
  if (!m.sweep.empty()) {
    w.key("lever_sweep").begin_array();
    for (const SweepRun& r : m.sweep)
      w.begin_object().key("lever").value(r.lever).key("images_per_s").value(rounded(r.images_per_s, 3)).end_object();
    w.end_array();
  }
  std::puts(w.end_object().str().c_str());
}

void print_text(const ArgParser& p, const BenchSettings& s, const Workload& b, const BenchResult& m) {
  const std::optional<DType>& amp = s.precision.amp;
  std::printf("%s %s on %s%s, batch %lld at %lldx%lld, %d threads: %lld steps in %.2f s\n", p.get("--model").c_str(),
              s.mode.c_str(), b.device.str().c_str(),
              amp ? (std::string(" (") + dtype_name(*amp) + " autocast)").c_str() : "", static_cast<long long>(s.batch),
              static_cast<long long>(b.img), static_cast<long long>(b.img), get_num_threads(),
              static_cast<long long>(m.timed.steps), m.timed.seconds);
  std::printf("  precision %s, instruction set %s\n", precision_name(amp).c_str(),
              instruction_set(b.device, amp == DType::BFloat16).c_str());
  if (m.graph.graph)
    std::printf("  CUDA Graph: each step one launch of a graph of %lld kernels, copies and library calls\n",
                static_cast<long long>(m.graph.graph->nodes()));
  std::printf("  %.2f images/s, %.1f ms/step, %.3f TFLOP/s achieved\n", m.images_per_s,
              1e3 * m.timed.seconds / static_cast<double>(m.timed.steps), m.tflops);
  std::printf(
      "  peak memory: %.1f MiB resident (process), tensors on %s %.1f MiB (%.1f MiB of them for the step), "
      "%.1f MiB reserved by the allocator\n",
      m.memory.peak_rss, b.device.str().c_str(), m.memory.tensor_peak, m.memory.step_tensors, m.memory.reserved_peak);
  if (m.profiler && p.is_set("--profile"))
    std::printf("\nprofile of %lld step(s):\n%s", static_cast<long long>(s.profile_steps), m.profiler->table().c_str());
  if (m.profiler && !p.get("--trace").empty()) std::printf("trace: %s\n", p.get("--trace").c_str());
  for (const SweepRun& r : m.sweep) std::printf("  %-34s %.2f images/s\n", r.lever.c_str(), r.images_per_s);
}

}  // namespace

int run_bench(const Argv& args) {
  ArgParser p = bench_parser();
  if (!p.parse(args)) return 0;
  const BenchSettings s = bench_settings(p);
  apply_threads_option(p);
  apply_precision(s.precision);
  Workload b(p, s);
  for (int64_t i = 0; i < s.warmup; ++i) b.step();
  synchronize(b.device);
  BenchResult m;
  if (s.cuda_graph) m.graph = capture_step(b);
  m.memory = memory_before_steps(b.device);
  m.timed = time_steps(
      [&] {
        if (m.graph.graph) m.graph.graph->replay();
        else b.step();
      },
      b.device, s);
  m.images_per_s = static_cast<double>(m.timed.steps * s.batch) / m.timed.seconds;
  m.sweep = sweep_levers(b, s);
  // Achieved arithmetic: 2 FLOPs per multiply-accumulate; a training step is about three forward
  // passes' worth (the backward computes two products per forward one). Divided by the device's
  // peak it is the model FLOPs utilisation (MFU).
  m.tflops =
      m.images_per_s * static_cast<double>(b.macs) / static_cast<double>(s.batch) * 2.0 * (s.train ? 3.0 : 1.0) / 1e12;
  profile_steps(b, p, s, m.profiler);
  m.memory = memory_after_steps(m.memory, b.device);
  if (p.is_set("--json")) print_json(p, s, b, m);
  else print_text(p, s, b, m);
  return 0;
}

}  // namespace tessera::cli
