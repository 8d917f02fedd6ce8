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

}  // namespace

int run_bench(const Argv& args) {
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
  if (!p.parse(args)) return 0;
  const std::string mode = p.get("--mode");
  if (mode != "infer" && mode != "train")
    throw UsageError("option --mode: expected infer or train, got '" + mode + "'");
  const bool train = mode == "train";
  const int64_t batch = p.get_int("--batch"), warmup = p.get_int("--warmup"), steps = p.get_int("--steps");
  if (batch <= 0 || warmup < 0 || steps <= 0)
    throw UsageError(detail::concat("options --batch and --steps must be positive and --warmup >= 0, got ", batch, ", ",
                                    steps, " and ", warmup));
  if (p.get_int("--profile-steps") <= 0)
    throw UsageError(
        detail::concat("option --profile-steps: expected a positive count, got ", p.get("--profile-steps")));
  const bool cuda_graph = p.is_set("--cuda-graph");
  if (cuda_graph && warmup < 1)
    throw UsageError("option --cuda-graph: the step is captured after the warm-up steps; give --warmup 1 or more");
  apply_threads_option(p);
  // The levers to sweep, checked before anything is built.
  std::vector<const LeverInfo*> sweep_levers;
  for (const std::string& name : split_list(p.get("--lever-sweep"))) {
    const auto& table = lever_table();
    const auto row = std::find_if(table.begin(), table.end(), [&](const LeverInfo& l) { return name == l.variable; });
    if (row == table.end()) throw UsageError("option --lever-sweep: '" + name + "' is not a lever of core/levers.h");
    sweep_levers.push_back(&*row);
  }

  const Precision precision = precision_options(p);
  apply_precision(precision);
  int64_t img = 0;
  auto model = build_model(p, &img);
  model->grad_checkpointing = p.is_set("--grad-checkpointing");
  model->train(train);
  const Device device = model->device();
  Generator gen(0);
  const Tensor images = randn({batch, p.get_int("--in-chans"), img, img}, DType::Float32, &gen, device);
  std::vector<int64_t> label_values(batch);
  for (int64_t i = 0; i < batch; ++i) label_values[i] = i % model->num_classes;
  const Tensor labels = from_vector(label_values, {batch}).to(device);
  int64_t macs = 0;  // of one forward pass of the batch, as the papers count (autograd/flop_counter.h)
  {
    NoGradGuard no_grad;
    FlopCounter counter;
    model->forward(images);
    macs = counter.macs();
  }
  AutocastWeights weight_casts;  // the first step learns which weights to cast ahead
  for (int64_t i = 0; i < warmup; ++i) run_step(*model, images, labels, train, precision.amp, weight_casts);
  synchronize(device);
  // --cuda-graph: the step recorded once (the warm-up filled the algorithm caches and the
  // allocator), then each timed step is one replay; where it cannot be captured, steps run eagerly.
  std::unique_ptr<DeviceGraph> graph;
  std::string graph_fallback;
  if (cuda_graph) {
    try {
      graph = capture_graph(device, [&] { run_step(*model, images, labels, train, precision.amp, weight_casts); });
    } catch (const CaptureError& e) {
      graph_fallback = e.what();
      std::fprintf(stderr, "--cuda-graph: the step cannot be captured, so it runs eagerly: %s\n", e.what());
    }
  }
  const auto step = [&] {
    if (graph) graph->replay();
    else run_step(*model, images, labels, train, precision.amp, weight_casts);
  };

  const int64_t rss_before = resident_bytes();
  reset_peak_memory(device.type);
  const int64_t tensors_before = memory_stats(device.type).allocated_bytes;
  // Steps until both --steps and --seconds are reached, each waited for.
  struct Timed {
    int64_t steps = 0;
    double seconds = 0;
  };
  const auto time_steps = [&](const std::function<void()>& one) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    Timed t;
    while (t.steps < steps || t.seconds < p.get_double("--seconds")) {
      one();
      synchronize(device);
      ++t.steps;
      t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
    return t;
  };
  const Timed timed = time_steps(step);
  const int64_t done = timed.steps;
  const double elapsed = timed.seconds;
  const double ips = static_cast<double>(done * batch) / elapsed;
  // --lever-sweep: the eager step with each lever flipped alone, then as set again (the drift check).
  struct SweepRun {
    std::string lever;
    double images_per_s;
  };
  std::vector<SweepRun> sweep;
  if (!sweep_levers.empty()) {
    const auto eager = [&] { run_step(*model, images, labels, train, precision.amp, weight_casts); };
    const auto timed_eager = [&] {
      for (int64_t i = 0; i < std::max<int64_t>(warmup, 1); ++i) eager();
      const Timed t = time_steps(eager);
      return static_cast<double>(t.steps * batch) / t.seconds;
    };
    sweep.push_back({"as set", timed_eager()});
    for (const LeverInfo* row : sweep_levers) {
      const bool flipped = !(levers().*(row->field));
      ScopedLever lever(row->field, flipped);
      sweep.push_back({std::string(row->variable) + (flipped ? "=1" : "=0"), timed_eager()});
    }
    sweep.push_back({"as set, again", timed_eager()});
  }
  // Achieved arithmetic: 2 FLOPs per multiply-accumulate; a training step is about three forward
  // passes' worth (the backward computes two products per forward one). Divided by the device's
  // peak it is the model FLOPs utilisation (MFU).
  const double tflops = ips * static_cast<double>(macs) / static_cast<double>(batch) * 2.0 * (train ? 3.0 : 1.0) / 1e12;
  // Profiled after the timed steps, so the timing is the unobserved one.
  std::optional<Profiler> profiler;
  if (p.is_set("--profile") || !p.get("--trace").empty()) {
    // Eager even with --cuda-graph: a replay is one launch, and the profile breaks down what it holds.
    profiler.emplace(p.is_set("--profile-sync") ? DeviceTiming::Synchronize : DeviceTiming::Marks);
    for (int64_t i = 0; i < p.get_int("--profile-steps"); ++i)
      run_step(*model, images, labels, train, precision.amp, weight_casts);
    synchronize(device);
    profiler->stop();
    if (!p.get("--trace").empty()) write_chrome_trace(*profiler, p.get("--trace"));
  }
  const double peak_rss = peak_resident_bytes() / kMiB;
  const double tensor_peak = memory_stats(device.type).peak_bytes / kMiB;
  const double step_tensors = (memory_stats(device.type).peak_bytes - tensors_before) / kMiB;
  // What the caching allocator held at its peak: the tensors plus its cache's slack.
  const double reserved_peak = static_cast<double>(allocator_stats(device).peak_reserved_bytes) / kMiB;
  if (p.is_set("--json")) {
    json::Writer w;
    w.begin_object().key("model").value(p.get("--model")).key("device").value(device.str()).key("mode").value(mode);
    w.key("batch").value(batch).key("img_size").value(img).key("threads").value(get_num_threads());
    w.key("steps").value(done).key("seconds").value(rounded(elapsed, 3)).key("images_per_s").value(rounded(ips, 3));
    w.key("peak_memory_mib").value(rounded(peak_rss, 1)).key("rss_before_mib").value(rounded(rss_before / kMiB, 1));
    w.key("tensor_peak_mib").value(rounded(tensor_peak, 1)).key("step_tensor_peak_mib").value(rounded(step_tensors, 1));
    w.key("reserved_peak_mib").value(rounded(reserved_peak, 1));
    w.key("macs_per_image").value(macs / batch).key("achieved_tflops").value(rounded(tflops, 4));
    if (cuda_graph) {
      // Launches per step with the graph: one; the graph's nodes are what the eager step launches.
      w.key("cuda_graph").begin_object().key("captured").value(graph != nullptr);
      if (graph) w.key("nodes").value(graph->nodes()).key("launches_per_step").value(int64_t{1});
      else w.key("fallback").value(graph_fallback);
      w.end_object();
    }
    if (profiler && p.is_set("--profile")) {
      w.key("profile").begin_array();
      for (const KernelSummary& r : profiler->summary()) {
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
      w.end_array().key("profile_wall_ms").value(rounded(profiler->wall_ms(), 3));
      if (!device.is_cpu()) {
        // Per profiled step: the instrument that needs no GPU (autograd/roofline.h, a model).
        const DeviceTotals t = profiler->device_totals();
        const double steps_profiled = static_cast<double>(p.get_int("--profile-steps"));
        w.key("device_per_step").begin_object();
        const auto per_step = [&](int64_t v) { return rounded(static_cast<double>(v) / steps_profiled, 1); };
        w.key("kernel_calls").value(per_step(t.calls));
        // What a step queues on the device, each a node of a CUDA Graph of the step: compare with
        // cuda_graph.nodes of --cuda-graph --json.
        w.key("launches").value(per_step(t.launches.total())).key("kernels").value(per_step(t.launches.kernels));
        w.key("library_calls").value(per_step(t.launches.library_calls));
        w.key("memory_ops").value(per_step(t.launches.memory_ops));
        w.key("outside_kernel_calls").value(per_step(t.outside_calls));
        w.key("timing").value(p.is_set("--profile-sync") ? "synchronize" : "events");
        w.key("bytes").value(rounded(static_cast<double>(t.bytes) / steps_profiled, 0));
        w.key("flops").value(rounded(2.0 * static_cast<double>(t.macs) / steps_profiled, 0));
        w.key("roofline_ms").value(rounded(t.model_ms / steps_profiled, 4)).key("roofline_gpu").value(h100_sxm().name);
        w.end_object();
      }
    }
    if (!sweep.empty()) {
      w.key("lever_sweep").begin_array();
      for (const SweepRun& r : sweep)
        w.begin_object().key("lever").value(r.lever).key("images_per_s").value(rounded(r.images_per_s, 3)).end_object();
      w.end_array();
    }
    std::puts(w.end_object().str().c_str());
    return 0;
  }
  std::printf("%s %s on %s%s, batch %lld at %lldx%lld, %d threads: %lld steps in %.2f s\n", p.get("--model").c_str(),
              mode.c_str(), device.str().c_str(),
              precision.amp ? (std::string(" (") + dtype_name(*precision.amp) + " autocast)").c_str() : "",
              static_cast<long long>(batch), static_cast<long long>(img), static_cast<long long>(img),
              get_num_threads(), static_cast<long long>(done), elapsed);
  if (graph)
    std::printf("  CUDA Graph: each step one launch of a graph of %lld kernels, copies and library calls\n",
                static_cast<long long>(graph->nodes()));
  std::printf("  %.2f images/s, %.1f ms/step, %.3f TFLOP/s achieved\n", ips, 1e3 * elapsed / static_cast<double>(done),
              tflops);
  std::printf(
      "  peak memory: %.1f MiB resident (process), tensors on %s %.1f MiB (%.1f MiB of them for the step), "
      "%.1f MiB reserved by the allocator\n",
      peak_rss, device.str().c_str(), tensor_peak, step_tensors, reserved_peak);
  if (profiler && p.is_set("--profile")) {
    std::printf("\nprofile of %lld step(s):\n%s", static_cast<long long>(p.get_int("--profile-steps")),
                profiler->table().c_str());
  }
  if (profiler && !p.get("--trace").empty()) std::printf("trace: %s\n", p.get("--trace").c_str());
  for (const SweepRun& r : sweep) std::printf("  %-34s %.2f images/s\n", r.lever.c_str(), r.images_per_s);
  return 0;
}

}  // namespace tessera::cli
