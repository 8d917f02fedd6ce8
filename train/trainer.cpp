// The training loop; see train/trainer.h.
#include "tessera/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <utility>

#include "tessera/core/atomic_file.h"
#include "tessera/core/autocast.h"
#include "tessera/core/backend.h"
#include "tessera/core/cpu_features.h"
#include "tessera/core/process_memory.h"
#include "tessera/data/mixup.h"
#include "tessera/models/model_file.h"
#include "tessera/ops/ops.h"
#include "tessera/data/class_map.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/device_batches.h"
#include "tessera/train/distributed/agreement.h"
#include "tessera/train/distributed/communicator.h"
#include "tessera/train/distributed/reducer.h"
#include "tessera/train/distributed/sync_batch_norm.h"
#include "tessera/train/ema.h"
#include "tessera/train/grad_scaler.h"
#include "tessera/train/layer_decay.h"
#include "tessera/train/optimizer.h"
#include "tessera/train/scheduler.h"
#include "tessera/train/step_graph.h"
#include "tessera/train/tensorboard.h"

namespace tessera::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// printf into a string of whatever length the text needs (a long checkpoint path is never cut);
// the compiler checks the arguments against the format as it does printf's.
__attribute__((format(printf, 1, 2))) std::string text(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

std::string duration_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  return text("%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

// A progress line on stderr: on a terminal redrawn in place (`last` ends it), else one per call.
void progress_line(const std::string& line, bool tty, bool last) {
  std::fprintf(stderr, tty ? "\r%s\033[K" : "%s\n", line.c_str());
  if (tty && last) std::fputc('\n', stderr);
}

// Counts of the samples whose label is among the k highest logits, for k = 1 and 5 (labels on the
// host, logits anywhere).
std::pair<int64_t, int64_t> correct_top1_top5(const Tensor& logits, const Tensor& labels) {
  const Tensor l = logits.to(Device::cpu()).contiguous().to(DType::Float32);
  const float* p = l.data<float>();
  const int64_t* y = labels.data<int64_t>();
  const int64_t n = l.size(0), c = l.size(1);
  int64_t top1 = 0, top5 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = p + i * c;
    int64_t rank = 0;  // classes scoring strictly higher than the true one (ties favour it)
    for (int64_t j = 0; j < c; ++j) rank += row[j] > row[y[i]];
    top1 += rank < 1;
    top5 += rank < 5;
  }
  return {top1, top5};
}

// The EMA tensor of each of the optimizer's parameters (parameters() order) that an optimizer
// fusing the EMA into its step (AdamW) can move itself: one of the parameter's dtype and device.
// Undefined for the others, which ModelEma::update averages with the buffers.
std::vector<Tensor> emas_of_parameters(const Optimizer& optimizer, const ModelEma& ema) {
  std::vector<Tensor> out;
  for (const ParamGroup& group : optimizer.groups())
    for (const auto& [name, p] : group.params) {
      const Tensor e = ema.average_of(name);
      out.push_back(e.defined() && e.dtype() == p.dtype() && e.device() == p.device() ? e : Tensor());
    }
  return out;
}

Tensor scalar_i64(int64_t v) { return from_vector(std::vector<int64_t>{v}, {1}); }

// What a run that must stop can offer: the checkpoint a --resume of its folder would take.
std::string last_good_checkpoint(const std::string& output) {
  const std::optional<std::string> found = output.empty() ? std::nullopt : find_resume(output);
  if (!found) return "No checkpoint was written" + (output.empty() ? std::string() : " to " + output);
  return "The last good checkpoint is " + *found + " (intact; --resume " + output + " continues from it)";
}

// Element-wise sums over the ranks of comm (the values themselves without one), in float64.
std::vector<double> sum_over_ranks(dist::Communicator* comm, std::vector<double> values) {
  if (!comm) return values;
  const Tensor t = from_vector(values, {static_cast<int64_t>(values.size())});
  Tensor on = comm->device().is_cpu() ? t : t.to(comm->device());
  comm->allreduce(on, dist::ReduceOp::Sum);
  return on.to(Device::cpu()).to_vector<double>();
}

// The settings every rank of a job must share (all but the per-process ones), and what the model
// and data are, for dist::check_agreement.
dist::Facts run_facts(const TrainOptions& o, const models::Model& model, const data::Dataset& train_set,
                      const data::Dataset& eval_set) {
  dist::Facts facts;
  for (const auto& [name, value] : o.settings)
    if (name != "threads" && name != "workers") facts.emplace_back(name, yaml_text(value));
  facts.emplace_back("parameter count", std::to_string(model.num_parameters()));
  facts.emplace_back("state_dict entries", std::to_string(model.state_dict().size()));
  // Models alike in size can still differ in shape or order, and then so would the buckets.
  uint64_t layout = 1469598103934665603ULL;  // FNV-1a over names, shapes and dtypes
  for (const auto& [name, t] : model.state_dict()) {
    std::string entry = name;
    entry += ':';
    entry += dtype_name(t.dtype());
    for (int64_t d : t.shape()) {
      entry += ',';
      entry += std::to_string(d);
    }
    entry += ';';
    for (char c : entry) layout = (layout ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  facts.emplace_back("model layout digest", std::to_string(layout));
  facts.emplace_back("gradient bucket bytes", std::to_string(o.bucket_bytes));
  facts.emplace_back("training set size", std::to_string(train_set.size()));
  facts.emplace_back("evaluation set size", std::to_string(eval_set.size()));
  facts.emplace_back("batch size", std::to_string(o.loader.batch_size));
  facts.emplace_back("grad accumulation steps", std::to_string(o.grad_accum_steps));
  facts.emplace_back("sync-bn", o.sync_bn ? "on" : "off");
  facts.emplace_back("seed", std::to_string(o.seed));
  facts.emplace_back("epochs", std::to_string(o.epochs));
  return facts;
}

}  // namespace

EvalResult evaluate(models::Model& model, data::DataLoader& loader, int64_t max_batches, std::optional<DType> amp,
                    dist::Communicator* comm, const EvalProgress& progress) {
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  EvalResult r;
  double loss_sum = 0;
  int64_t top1 = 0, top5 = 0;
  const Device device = model.device();
  const int64_t batches =
      max_batches > 0 ? std::min(max_batches, loader.batches_per_epoch()) : loader.batches_per_epoch();
  const bool tty = progress.log_interval > 0 && isatty(STDERR_FILENO);
  const auto start = Clock::now();
  int64_t seen = 0;  // this process's samples, padding included: the work done
  AutocastWeights weight_casts;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    if (max_batches > 0 && batch->index >= max_batches) break;
    std::optional<AutocastGuard> autocast;
    if (amp) autocast.emplace(device.type, *amp);
    AutocastWeights::Pass weights(weight_casts, device);
    // Samples that only pad this rank's shard to equal length are computed and not counted.
    const int64_t n = batch->images.size(0) - batch->padding;
    if (n > 0) {
      const Tensor logits = model.forward(batch->images.to(device)).narrow(0, 0, n);
      const Tensor labels = batch->labels.narrow(0, 0, n);
      loss_sum += cross_entropy(logits, labels.to(device)).item() * static_cast<double>(n);
      const auto [c1, c5] = correct_top1_top5(logits, labels);
      top1 += c1;
      top5 += c5;
      r.samples += n;
    }
    seen += batch->images.size(0);
    const int64_t done = batch->index + 1;
    const bool last = done == batches;
    if (progress.log_interval > 0 && (tty || last || done % progress.log_interval == 0)) {
      const double elapsed = seconds_since(start);
      const double eta = elapsed / static_cast<double>(done) * static_cast<double>(batches - done);
      // This process's running top-1; the final result is summed over the ranks.
      const double running_top1 =
          r.samples > 0 ? 100.0 * static_cast<double>(top1) / static_cast<double>(r.samples) : 0;
      const double world = comm ? static_cast<double>(comm->size()) : 1.0;
      progress_line(text("%s: [%4lld/%lld]  top1 %.2f  %.1f img/s  eta %s", progress.label.c_str(),
                         static_cast<long long>(done), static_cast<long long>(batches), running_top1,
                         static_cast<double>(seen) * world / std::max(elapsed, 1e-9), duration_text(eta).c_str()),
                    tty, last);
    }
  }
  model.train(was_training);
  const std::vector<double> totals = sum_over_ranks(
      comm, {loss_sum, static_cast<double>(top1), static_cast<double>(top5), static_cast<double>(r.samples)});
  loss_sum = totals[0];
  top1 = static_cast<int64_t>(totals[1]);
  top5 = static_cast<int64_t>(totals[2]);
  r.samples = static_cast<int64_t>(totals[3]);
  TS_CHECK(r.samples > 0, "evaluate: the evaluation set gave no samples");
  r.loss = loss_sum / static_cast<double>(r.samples);
  r.top1 = 100.0 * static_cast<double>(top1) / static_cast<double>(r.samples);
  r.top5 = 100.0 * static_cast<double>(top5) / static_cast<double>(r.samples);
  return r;
}

namespace {

// What one epoch of training gives the epoch's report.
struct EpochStats {
  double loss = 0;     // mean loss per update, over the job's ranks
  int64_t images = 0;  // this process's; the job's are world times as many
  double seconds = 0;
  double comm_wait = 0;  // seconds of it spent waiting on gradient communication
  double data_wait = 0;  // seconds of it spent waiting for the loader's batches
};

}  // namespace

// A run's parts and its position (the update count, the epochs). The constructor builds the parts
// in the order their dependencies need; fit() is timm's main loop over train_one_epoch, validate
// and the epoch's record, each a method below.
struct Trainer::State {
  State(std::shared_ptr<models::Model> model, std::shared_ptr<const data::Dataset> train_set,
        std::shared_ptr<const data::Dataset> eval_set, TrainOptions options);

  std::vector<SummaryRow> fit();

  TrainOptions o;
  std::shared_ptr<models::Model> model_ptr;
  models::Model& model;
  std::unique_ptr<data::DataLoader> train_loader, eval_loader;
  std::unique_ptr<DeviceBatches> train_batches;  // train_loader's batches on the model's device
  std::unique_ptr<Optimizer> optimizer;
  std::optional<LrScheduler> scheduler;
  std::unique_ptr<ModelEma> ema;
  std::unique_ptr<GradScaler> scaler;  // float16 mixed precision
  std::optional<data::Mixup> mixup;
  std::unique_ptr<CheckpointSaver> saver;
  std::unique_ptr<SummaryWriter> events;
  std::unique_ptr<dist::GradReducer> reducer;  // data parallel: averages the gradients
  std::unique_ptr<StepGraph> step_graph;       // --cuda-graph
  AutocastWeights weight_casts;                // under --amp, the weights' casts ahead of each forward
  std::vector<Tensor> params;                  // the optimizer's, in its order
  std::vector<Tensor> param_emas;              // their EMA tensors, offered to each update (UpdateOptions::emas)
  int rank = 0, world = 1;
  bool writes = false;          // this process writes the run folder (rank 0)
  int64_t steps_per_epoch = 0;  // updates; each takes grad_accum_steps batches
  int64_t start_epoch = 0;
  int64_t end_epoch = 0;    // epochs + cooldown_epochs (cosine)
  int64_t global_step = 0;  // optimizer updates done
  bool tty = false;

 private:
  // ---- construction, in this order
  void check_options(const data::Dataset& train_set) const;
  void make_loaders(std::shared_ptr<const data::Dataset> train_set, std::shared_ptr<const data::Dataset> eval_set);
  void join_job();  // data parallel: rank 0's weights everywhere, sync BN, the gradient reducer
  void load_initial_checkpoint();
  void make_optimizer_and_schedule();
  void set_precision();
  void resume(const std::string& checkpoint_or_folder);
  void open_run_folder();
  void check_checkpoint_needs();
  void make_step_graph();  // --cuda-graph, where the run allows it

  // ---- training
  EpochStats train_one_epoch(int64_t epoch);
  // One update: grad_accum_steps batches forward and backward, then the optimizer step (update(),
  // eagerly or replayed as a CUDA Graph). Returns the update's loss (the micro-batches' mean) where
  // it was computed, unread, and adds the images it saw to `images`.
  Tensor train_step(int64_t epoch, int64_t step, int64_t& images);
  // The update itself, the one statement of it for both ways of running a step: `micro_batches`
  // batches (batch(micro): device images and targets), their gradients summed (in a data-parallel
  // job the last one's backward sends them and finish() completes their average), then clipping,
  // the optimizer and the EMA, for update global_step + 1 (the caller counts it). Under float16's
  // loss scaling an update whose gradients overflowed is skipped. With --cuda-graph the graph holds
  // it with one batch, no loss scaling and no communicator (make_step_graph refuses the others).
  struct Update {
    Tensor loss;  // the micro-batches' mean, float64, unread
    bool skipped = false;
  };
  using MicroBatch = std::function<std::pair<Tensor, Tensor>(int64_t micro)>;
  Update update(int64_t micro_batches, const MicroBatch& batch);
  // Reads the latest loss and the epoch's running sum (a wait for the device) and stops the run on
  // a NaN or infinite loss.
  void read_loss(const Tensor& loss, const Tensor& loss_sum, int64_t epoch, int64_t step, int64_t last_read,
                 double& value, double& sum_value);
  // train_step as a CUDA Graph replays it (step_graph).
  Tensor graph_step(int64_t epoch, int64_t step, int64_t& images);
  // Mixup's soft targets of batch `index` (mixing its images in place), or its labels.
  Tensor targets_of(data::Batch& batch, int64_t epoch, int64_t index);
  // The loss of device images against device targets (targets_of), under autocast where mixed
  // precision is on.
  Tensor loss_of(const Tensor& images, const Tensor& targets);
  bool log_point(int64_t step) const;  // a log line (and, on a GPU, a read of the loss) after this update
  void log_step(int64_t epoch, int64_t step, double loss, double loss_sum, int64_t last_read, int64_t images,
                Clock::time_point epoch_start);
  // ---- after each epoch
  void average_batch_norm_statistics();
  EvalResult validate(int64_t epoch);
  void record_epoch(const SummaryRow& row, const EpochStats& train, bool evaluated);
  void save_checkpoint(int64_t epoch, double top1, bool evaluated);

  void log(const std::string& line) const {
    if (o.verbose) std::fprintf(stderr, "%s\n", line.c_str());
  }
  // The progress of evaluation `label` as this run prints it (silent when not verbose).
  EvalProgress eval_progress(const char* label) const {
    return {o.verbose ? std::max<int64_t>(o.log_interval, 1) : 0, label};
  }
};

Trainer::State::State(std::shared_ptr<models::Model> model_in, std::shared_ptr<const data::Dataset> train_set,
                      std::shared_ptr<const data::Dataset> eval_set, TrainOptions options)
    : o(std::move(options)), model_ptr(std::move(model_in)), model(*model_ptr) {
  end_epoch = o.epochs + (o.sched == "cosine" ? o.cooldown_epochs : 0);
  check_options(*train_set);
  if (o.comm) {
    rank = o.comm->rank();
    world = o.comm->size();
    dist::check_agreement(*o.comm, run_facts(o, model, *train_set, *eval_set));
    o.verbose = o.verbose && rank == 0;  // one voice; errors still come from every rank
  }
  tty = o.verbose && isatty(STDERR_FILENO);
  make_loaders(std::move(train_set), std::move(eval_set));
  if (o.mixup.mixup_alpha > 0 || o.mixup.cutmix_alpha > 0 || o.mixup.cutmix_minmax) {
    data::MixupOptions m = o.mixup;
    m.label_smoothing = o.smoothing;
    m.num_classes = model.num_classes;
    mixup.emplace(m);
  }
  if (o.comm) join_job();
  // Before the EMA copies the model and before a resume, which replaces these weights.
  if (!o.initial_checkpoint.empty()) load_initial_checkpoint();
  make_optimizer_and_schedule();
  if (o.model_ema) ema = std::make_unique<ModelEma>(model, o.model_ema_decay);
  set_precision();
  // Each rank its own dropout and drop-path stream (timm: seed + rank); rank 0's is a single
  // process's.
  manual_seed(o.seed + static_cast<uint64_t>(rank));
  if (!o.resume.empty()) resume(o.resume);
  if (o.start_epoch) {
    // As timm steps its scheduler to the start epoch: the schedule resumes at that epoch's start.
    start_epoch = *o.start_epoch;
    global_step = start_epoch * steps_per_epoch;
  }
  params = optimizer->parameters();
  if (ema) param_emas = emas_of_parameters(*optimizer, *ema);  // after a resume loaded the EMA
  writes = !o.output.empty() && rank == 0;
  if (writes) open_run_folder();
  if (o.cuda_graph) make_step_graph();
}

void Trainer::State::check_options(const data::Dataset& train_set) const {
  const int64_t batch = o.loader.batch_size;
  TS_CHECK(o.epochs > 0 && batch > 0, "Trainer: epochs and batch size must be positive, got ", o.epochs, " and ",
           batch);
  TS_CHECK(train_set.size() >= batch, "Trainer: the training set has ", train_set.size(),
           " samples, fewer than one batch of ", batch);
  TS_CHECK(o.grad_accum_steps >= 1, "--grad-accum-steps: expected at least 1, got ", o.grad_accum_steps);
  TS_CHECK(o.val_interval >= 1, "--val-interval: expected at least 1 (evaluate every N epochs), got ", o.val_interval);
  TS_CHECK(o.cooldown_epochs >= 0, "--cooldown-epochs: expected at least 0, got ", o.cooldown_epochs);
  TS_CHECK(!o.start_epoch || (*o.start_epoch >= 0 && *o.start_epoch < end_epoch),
           "--start-epoch: expected an epoch in [0, ", end_epoch, "), got ", o.start_epoch.value_or(0));
}

void Trainer::State::make_loaders(std::shared_ptr<const data::Dataset> train_set,
                                  std::shared_ptr<const data::Dataset> eval_set) {
  const int64_t img = model.default_img_size;
  data::TransformOptions train_tf = o.train_transform, eval_tf = o.eval_transform;
  train_tf.img_size = eval_tf.img_size = img;
  train_tf.is_training = true;
  eval_tf.is_training = false;
  // Training batches are all full (timm drops the last partial batch), so Mixup always has
  // partners and every step has the same size.
  data::LoaderOptions train_lo = o.loader;
  train_lo.shuffle = true;
  train_lo.drop_last = true;
  train_lo.seed = o.seed;
  train_lo.verbose = o.verbose;
  train_lo.rank = rank;
  train_lo.world_size = world;
  // Batches bound for a GPU are decoded into pinned host memory, so the copy of each batch to the
  // device is asynchronous and runs beside the step before it (train/device_batches.h).
  train_lo.feeds_gpu = !model.device().is_cpu();
  if (Allocator* pinned = pinned_host_allocator(model.device().type))
    train_lo.allocate = [pinned](const Shape& shape, DType dtype) {
      return Tensor::empty(shape, dtype, Device::cpu(), *pinned);
    };
  data::LoaderOptions eval_lo = train_lo;
  eval_lo.shuffle = false;
  eval_lo.drop_last = false;
  eval_lo.repeats = 0;
  train_loader = std::make_unique<data::DataLoader>(std::move(train_set), data::create_transform(train_tf), train_lo);
  eval_loader = std::make_unique<data::DataLoader>(std::move(eval_set), data::create_transform(eval_tf), eval_lo);
  train_batches = std::make_unique<DeviceBatches>(
      *train_loader, model.device(),
      [this](data::Batch& batch, int64_t epoch, int64_t index) { return targets_of(batch, epoch, index); });
  int64_t batches = train_loader->batches_per_epoch();
  if (o.max_train_batches > 0) batches = std::min(batches, o.max_train_batches);
  steps_per_epoch = batches / o.grad_accum_steps;  // a trailing partial accumulation is dropped
  TS_CHECK(steps_per_epoch > 0, "Trainer: an epoch has ", batches, " batches of ", o.loader.batch_size,
           " per process, fewer than one update of --grad-accum-steps ", o.grad_accum_steps);
}

void Trainer::State::join_job() {
  // Every rank starts from rank 0's weights and buffers (a resumed run then loads the same
  // checkpoint on every rank).
  NoGradGuard no_grad;
  for (const auto& [name, t] : model.state_dict()) o.comm->broadcast(t, 0);
  if (o.sync_bn) dist::convert_sync_batchnorm(model, o.comm);
  reducer = std::make_unique<dist::GradReducer>(*o.comm, model.parameters(), o.bucket_bytes);
}

void Trainer::State::load_initial_checkpoint() {
  const nn::LoadReport report =
      model.load_state_dict(model.to_own_names(load_initial_weights(o.initial_checkpoint)), /*strict=*/false);
  TS_CHECK(report.missing.empty() && report.unexpected.empty() && report.mismatched.empty(), "--initial-checkpoint ",
           o.initial_checkpoint, " does not fit the model: ", report.str());
  log("initial weights from " + o.initial_checkpoint);
}

void Trainer::State::make_optimizer_and_schedule() {
  std::vector<ParamGroup> groups = o.layer_decay ? param_groups_layer_decay(model, o.weight_decay, *o.layer_decay)
                                                 : param_groups(model, o.weight_decay);
  optimizer = create_optimizer(o.opt, std::move(groups), o.lr, o.momentum, o.opt_eps, o.opt_betas);
  // Lengths of the schedule in updates (timm's --sched-on-updates).
  const auto updates = [&](double epochs) { return std::llround(epochs * static_cast<double>(steps_per_epoch)); };
  ScheduleOptions so;
  so.lr = o.lr;
  so.total_steps = o.epochs * steps_per_epoch;
  so.warmup_steps = updates(o.warmup_epochs);
  so.warmup_lr = o.warmup_lr;
  so.min_lr = o.min_lr;
  so.decay_steps = std::max<int64_t>(1, updates(o.decay_epochs));
  so.decay_rate = o.decay_rate;
  scheduler.emplace(create_scheduler(o.sched, so));
}

void Trainer::State::set_precision() {
  if (o.amp) {
    AutocastGuard check(model.device().type, *o.amp);  // refuses anything but bfloat16/float16 (bfloat16 on the CPU)
    if (*o.amp == DType::Float16) scaler = std::make_unique<GradScaler>();
  }
  // A data-parallel run keeps the per-use casts: its gradient buckets go out while backward still
  // runs, and casts made ahead would hand every weight's gradient over at the end
  // (ops/autocast_weights.h).
  weight_casts = AutocastWeights(world == 1);
  set_allow_tf32(o.tf32);
  set_amp_activations(o.amp_activations);
  set_deterministic_algorithms(o.deterministic);
  log(text("precision: %s on %s, instruction set %s", precision_name(o.amp).c_str(), model.device().str().c_str(),
           instruction_set(model.device(), o.amp == DType::BFloat16).c_str()));
}

void Trainer::State::resume(const std::string& checkpoint_or_folder) {
  std::string path = checkpoint_or_folder;
  if (fs::is_directory(path)) {
    const auto found = find_resume(path);
    TS_CHECK(found.has_value(), "resume: no complete checkpoint in ", path);
    path = *found;
  }
  // The classes the run learned, as numbered then (data/class_map.h), before anything is loaded.
  const fs::path class_map = fs::path(path).parent_path() / data::kClassMapFile;
  if (fs::exists(class_map))
    data::check_class_map(class_map.string(), train_loader->dataset().classes(), "resume: the training dataset");
  const CheckpointData ck = load_checkpoint(path);
  model.load_state_dict(ck.weights);
  optimizer->load_state_dict(strip_prefix("optimizer.", ck.state));
  if (ema) {
    const nn::NamedTensors ema_state = strip_prefix("ema.", ck.state);
    TS_CHECK(!ema_state.empty(), "resume: ", path, " has no EMA state but --model-ema is on");
    ema->load_state_dict(ema_state);
  }
  if (scaler) {
    const nn::NamedTensors amp_state = strip_prefix("amp.", ck.state);
    if (!amp_state.empty()) scaler->load_state_dict(amp_state);  // a float32 run resumed in float16 starts afresh
  }
  // The checkpoint holds rank 0's stream; every rank advanced its own by the same amount.
  default_generator().seed(static_cast<uint64_t>(state_scalar(ck, "rng.seed")) + static_cast<uint64_t>(rank));
  default_generator().set_offset(static_cast<uint64_t>(state_scalar(ck, "rng.offset")));
  global_step = state_scalar(ck, "trainer.global_step");
  start_epoch = ck.epoch + 1;
  log(text("resumed from %s (epoch %lld done, %lld updates)", path.c_str(), static_cast<long long>(ck.epoch),
           static_cast<long long>(global_step)));
}

// What saving a checkpoint needs, checked before the first step, so that no input that would fail
// there costs a step: the model file every checkpoint records reads back as one (UTF-8, within a
// model file's limits: io/untrusted_text.h), and the output folder has room for one checkpoint.
void Trainer::State::check_checkpoint_needs() {
  if (!model.model_file().empty()) {
    try {
      models::read_model_file(model.model_file(), "(this run's model)");
    } catch (const Error& e) {
      throw Error(std::string("train: every checkpoint records the model's file, and this model's does not read back "
                              "as one, so no checkpoint could be saved: ") +
                  e.what());
    }
  }
  const auto bytes_of = [](const nn::NamedTensors& tensors) {
    int64_t n = 0;
    for (const auto& [name, t] : tensors) n += t.numel() * static_cast<int64_t>(t.element_size());
    return n;
  };
  const int64_t weights = bytes_of(model.state_dict());
  int64_t state = bytes_of(optimizer->state_dict());
  if (state == 0) state = 2 * weights;  // made at the first step: Adam's two moments at most
  check_room_for_checkpoint(o.output, weights * (ema ? 2 : 1) + state);
}

void Trainer::State::open_run_folder() {
  fs::create_directories(o.output);
  check_checkpoint_needs();
  // The flags, and what the run computed in (train/output.h kRecordedSettings).
  Settings recorded = o.settings;
  recorded.emplace_back("precision", precision_name(o.amp));
  recorded.emplace_back("instruction_set", instruction_set(model.device(), o.amp == DType::BFloat16));
  write_args_yaml((fs::path(o.output) / "args.yaml").string(), recorded);
  data::write_class_map((fs::path(o.output) / data::kClassMapFile).string(), train_loader->dataset().classes());
  // The model as a file (models/model_file.h): `tessera train --model model.yaml` builds it again.
  if (!model.model_file().empty())
    write_file_atomically((fs::path(o.output) / kModelFileName).string(), model.model_file());
  saver = std::make_unique<CheckpointSaver>(o.output, o.checkpoint_hist, "top1", true);
  events = std::make_unique<SummaryWriter>(o.output);
  if (start_epoch > 0) truncate_summary((fs::path(o.output) / "summary.csv").string(), start_epoch - 1);
}

// Eager steps before the capture: the library algorithm caches, the optimizer state and the
// allocator fill up, and the EMA's first update (a copy) is done.
constexpr int kCudaGraphWarmup = 2;

void Trainer::State::make_step_graph() {
  // What a graph cannot hold yet and is known before any step; what shows only while capturing (a
  // host read) makes StepGraph fall back at its capture.
  std::string refused;
  if (model.device().is_cpu()) refused = "CUDA Graphs need a cuda device, and the model is on the cpu";
  else if (o.comm)
    refused =
        "data-parallel gradients are reduced in buckets that autograd hooks start from the host, and each collective "
        "is polled against --dist-timeout (an event query, which a capture forbids), so collectives stay outside the "
        "graph";
  else if (scaler)
    refused = "float16's dynamic loss scaling decides on the host whether a step is skipped (--amp bf16 has none)";
  else if (o.grad_accum_steps > 1) refused = "gradient accumulation (--grad-accum-steps) is not captured yet";
  else if (!optimizer->supports_capture())
    refused =
        "optimizer " + optimizer->name() + " passes its per-step values as launch arguments (adamw and adam do not)";
  else if (ema && ema->warmup())
    refused = "the EMA's warm-up changes its weight every step, and the EMA of buffers takes it as a launch argument";
  if (!refused.empty()) {
    log("--cuda-graph: " + refused + "; training eagerly");
    return;
  }
  optimizer->set_capturable(true);
  step_graph = std::make_unique<StepGraph>(
      model.device(),
      [this](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{update(1, [&](int64_t) { return std::pair{in[0], in[1]}; }).loss};
      },
      kCudaGraphWarmup, [this](const std::string& line) { log(line); });
}

std::vector<SummaryRow> Trainer::State::fit() {
  std::vector<SummaryRow> rows;
  const int64_t end = o.stop_after > 0 ? std::min(end_epoch, start_epoch + o.stop_after) : end_epoch;
  for (int64_t epoch = start_epoch; epoch < end; ++epoch) {
    const EpochStats train = train_one_epoch(epoch);
    if (o.comm && !o.sync_bn) average_batch_norm_statistics();
    // Evaluation every val_interval epochs and after the last; an epoch not evaluated reports NaN.
    const bool evaluates = (epoch + 1) % o.val_interval == 0 || epoch + 1 == end_epoch;
    const EvalResult eval = evaluates ? validate(epoch) : EvalResult{NAN, NAN, NAN, 0};
    rows.push_back({epoch, train.loss, eval.loss, eval.top1, eval.top5, optimizer->lr()});
    record_epoch(rows.back(), train, evaluates);
  }
  return rows;
}

EpochStats Trainer::State::train_one_epoch(int64_t epoch) {
  model.train();
  train_loader->start_epoch(epoch);
  train_batches->start_epoch(epoch, steps_per_epoch * o.grad_accum_steps);
  EpochStats stats;
  const double data_waited_before = train_loader->wait_seconds();
  // The losses stay where they were computed and are summed there: reading one waits for the
  // device to finish the step, so on a GPU they are read every log_interval updates (and after the
  // last), on the CPU (where a read costs nothing) after every update.
  Tensor loss_sum_tensor;
  double loss = NAN, loss_sum = 0;
  int64_t last_read = -1;
  const bool read_every_step = model.device().is_cpu();
  const double waited_before = reducer ? reducer->wait_seconds() : 0.0;
  const auto epoch_start = Clock::now();
  for (int64_t step = 0; step < steps_per_epoch; ++step) {
    optimizer->set_lr(scheduler->lr_at(global_step));
    const Tensor step_loss = train_step(epoch, step, stats.images);
    // (A graph's replay rewrites step_loss: the running sum starts as a copy.)
    loss_sum_tensor = loss_sum_tensor.defined() ? loss_sum_tensor + step_loss : step_loss.clone();
    if (read_every_step || log_point(step)) {
      read_loss(step_loss, loss_sum_tensor, epoch, step, last_read, loss, loss_sum);
      last_read = step;
    }
    log_step(epoch, step, loss, loss_sum, last_read, stats.images, epoch_start);
  }
  stats.seconds = seconds_since(epoch_start);
  stats.comm_wait = reducer ? reducer->wait_seconds() - waited_before : 0.0;
  stats.data_wait = train_loader->wait_seconds() - data_waited_before;
  // The job's mean training loss.
  if (o.comm) loss_sum = sum_over_ranks(o.comm.get(), {loss_sum})[0] / static_cast<double>(world);
  stats.loss = loss_sum / static_cast<double>(steps_per_epoch);
  return stats;
}

void Trainer::State::read_loss(const Tensor& loss, const Tensor& loss_sum, int64_t epoch, int64_t step,
                               int64_t last_read, double& value, double& sum_value) {
  value = loss.item();
  sum_value = loss_sum.item();
  if (std::isfinite(sum_value)) return;
  // On the CPU every update's loss is read before the update is made; on a GPU the bad loss came in
  // one of the updates since the last read, and may have reached the live weights (not any saved
  // checkpoint: the epoch's end reads the losses before it saves).
  const std::string where = step == last_read + 1
                                ? "at epoch " + std::to_string(epoch) + ", step " + std::to_string(step)
                                : "at epoch " + std::to_string(epoch) + ", in steps " + std::to_string(last_read + 1) +
                                      " to " + std::to_string(step) + " (read every --log-interval steps on " +
                                      model.device().str() + ")";
  throw Error("train: the loss is " + std::string(std::isnan(sum_value) ? "NaN" : "infinite") + " " + where +
              " (update " + std::to_string(global_step) + ", lr " + std::to_string(optimizer->lr()) +
              "); stopping, with nothing saved from it. " + last_good_checkpoint(o.output) +
              "; try a lower --lr or --clip-grad.");
}

Tensor Trainer::State::train_step(int64_t epoch, int64_t step, int64_t& images) {
  if (step_graph) return graph_step(epoch, step, images);
  const Update u = update(o.grad_accum_steps, [&](int64_t micro) {
    const DeviceBatches::Item batch = train_batches->next(step * o.grad_accum_steps + micro);  // of the epoch
    images += batch.count;
    return std::pair{batch.images, batch.targets};
  });
  ++global_step;
  if (u.skipped && o.verbose)
    progress_line(text("Train: %lld [%lld] float16 gradients overflowed: update skipped, loss scale now %g",
                       static_cast<long long>(epoch), static_cast<long long>(step + 1), scaler->scale_value()),
                  tty, true);
  return u.loss;
}

Trainer::State::Update Trainer::State::update(int64_t micro_batches, const MicroBatch& batch) {
  // No gradient to add to: a capture that failed after backward left some that nothing computed,
  // and the same step then runs again eagerly.
  optimizer->zero_grad();
  Tensor step_loss;
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const auto [images, targets] = batch(micro);
    Tensor loss = loss_of(images, targets);
    if (micro_batches > 1) loss = loss / static_cast<double>(micro_batches);
    {
      NoGradGuard no_grad;
      const Tensor value = loss.detach().to(DType::Float64);  // summed as the host summed doubles
      step_loss = step_loss.defined() ? step_loss + value : value;
    }
    if (reducer) reducer->prepare(micro + 1 == micro_batches);
    (scaler ? scaler->scale(loss) : loss).backward();
  }
  // The averaged gradients are complete here, before clipping computes their norm.
  if (reducer) reducer->finish();
  const bool finite = !scaler || scaler->unscale_(params);
  std::vector<Tensor> averaged;  // EMA tensors the optimizer step moved itself
  if (finite) {
    UpdateOptions options{o.clip_grad, param_emas, 0.0};
    if (ema) options.ema_weight = ema->weight_at(global_step + 1);  // the update about to be made
    averaged = optimizer->step(options);
  }
  optimizer->zero_grad();
  if (scaler) scaler->update(finite);
  if (ema && finite) ema->update(model, global_step + 1, averaged);
  return {step_loss, !finite};
}

Tensor Trainer::State::targets_of(data::Batch& batch, int64_t epoch, int64_t index) {
  if (!mixup) return batch.labels;
  // The mixing stream of a batch depends only on (seed, rank, epoch, batch), like the loader's.
  data::SampleRng rng((o.seed + static_cast<uint64_t>(rank)) ^ 0x6D69787570ull, static_cast<uint64_t>(epoch),
                      static_cast<uint64_t>(index));
  return (*mixup)(batch.images, batch.labels, rng);
}

Tensor Trainer::State::loss_of(const Tensor& images, const Tensor& targets) {
  std::optional<AutocastGuard> autocast;
  if (o.amp) autocast.emplace(images.device().type, *o.amp);
  AutocastWeights::Pass weights(weight_casts, images.device());
  const Tensor logits = model.forward(images);
  return mixup ? soft_cross_entropy(logits, targets) : cross_entropy(logits, targets, o.smoothing);
}

// With --cuda-graph: the host's part of an update (the batch, Mixup, the optimizer's per-step
// values and count), then the step itself, replayed (or run eagerly while warming up).
Tensor Trainer::State::graph_step(int64_t epoch, int64_t step, int64_t& images) {
  std::optional<data::Batch> batch = train_loader->next();
  TS_CHECK(batch.has_value(), "train: the loader ended epoch ", epoch, " after ", step, " of ", steps_per_epoch,
           " batches");
  const Tensor targets = targets_of(*batch, epoch, step);
  images += batch->images.size(0);
  optimizer->begin_step(ema ? ema->weight_at(global_step + 1) : 0.0);
  const Tensor loss = step_graph->run({batch->images, targets})[0];
  ++global_step;
  return loss;
}

bool Trainer::State::log_point(int64_t step) const {
  return (step + 1) % std::max<int64_t>(o.log_interval, 1) == 0 || step + 1 == steps_per_epoch;
}

// TensorBoard scalars and the progress line, every log_interval updates and after the last (on a
// terminal the line is redrawn after every update, with the losses as last read: `last_read`).
void Trainer::State::log_step(int64_t epoch, int64_t step, double loss, double loss_sum, int64_t last_read,
                              int64_t images, Clock::time_point epoch_start) {
  const double lr = optimizer->lr();
  const bool last = step + 1 == steps_per_epoch;
  const bool log_now = log_point(step);
  if (events && log_now) {
    events->add_scalar("train/loss", loss, global_step);
    events->add_scalar("train/lr", lr, global_step);
    if (scaler) events->add_scalar("train/loss_scale", scaler->scale_value(), global_step);
  }
  if (!o.verbose || !(tty || log_now)) return;
  const double elapsed = seconds_since(epoch_start);
  const double eta = elapsed / static_cast<double>(step + 1) * static_cast<double>(steps_per_epoch - step - 1);
  const std::string losses =
      last_read >= 0 ? text("%.4f (%.4f)", loss, loss_sum / static_cast<double>(last_read + 1)) : "- (-)";
  progress_line(
      text("Train: %lld [%5lld/%lld (%3.0f%%)]  loss %s  lr %.3e  %.1f img/s  eta %s", static_cast<long long>(epoch),
           static_cast<long long>(step + 1), static_cast<long long>(steps_per_epoch),
           100.0 * static_cast<double>(step + 1) / static_cast<double>(steps_per_epoch), losses.c_str(), lr,
           static_cast<double>(images * world) / elapsed, duration_text(eta).c_str()),
      tty, last);
}

// Without --sync-bn each rank's batch norm saw only its own batches: their statistics are averaged
// before evaluation and checkpointing (timm's --dist-bn reduce).
void Trainer::State::average_batch_norm_statistics() {
  NoGradGuard no_grad;
  for (const auto& [name, t] : model.named_buffers())
    if (is_floating(t.dtype())) o.comm->allreduce(t, dist::ReduceOp::Avg);
}

// timm's validate: with EMA on, the averaged weights are what is reported and checkpointed as the
// run's metric (as timm does); the live weights are evaluated too and restored afterwards.
EvalResult Trainer::State::validate(int64_t epoch) {
  const EvalResult live = evaluate(model, *eval_loader, o.max_eval_batches, o.amp, o.comm.get(), eval_progress("Test"));
  if (!ema) {
    log(text("Eval %lld: loss %.4f top1 %.2f top5 %.2f", static_cast<long long>(epoch), live.loss, live.top1,
             live.top5));
    return live;
  }
  nn::NamedTensors weights;
  for (const auto& [name, t] : model.state_dict()) weights.emplace_back(name, t.clone());
  ema->copy_to(model);
  const EvalResult averaged =
      evaluate(model, *eval_loader, o.max_eval_batches, o.amp, o.comm.get(), eval_progress("Test (EMA)"));
  model.load_state_dict(weights);
  log(text("Eval %lld: loss %.4f top1 %.2f top5 %.2f (EMA: loss %.4f top1 %.2f top5 %.2f)",
           static_cast<long long>(epoch), live.loss, live.top1, live.top5, averaged.loss, averaged.top1,
           averaged.top5));
  return averaged;
}

// The epoch's line, and in the run folder its summary.csv row, TensorBoard scalars and checkpoint.
void Trainer::State::record_epoch(const SummaryRow& row, const EpochStats& train, bool evaluated) {
  // Resident memory after each epoch (training, evaluation): flat over a long run unless
  // something leaks (docs/reliability.md, "Long runs").
  const double resident_mib = static_cast<double>(resident_bytes()) / (1024.0 * 1024.0);
  const double data_wait_percent = 100.0 * train.data_wait / train.seconds;
  log(
      text("Epoch %lld done in %s (%.1f img/s, %.1f%% waiting for data, %.0f MiB resident): train loss %.4f, eval "
           "top1 %s",
           static_cast<long long>(row.epoch), duration_text(train.seconds).c_str(),
           static_cast<double>(train.images * world) / train.seconds, data_wait_percent, resident_mib, row.train_loss,
           evaluated ? text("%.2f%%", row.eval_top1).c_str() : "not measured (--val-interval)"));
  if (o.comm)
    log(text("  %d ranks (%s): %.1f%% of the training time waiting on gradient communication", world,
             o.comm->backend().c_str(), 100.0 * train.comm_wait / train.seconds));
  if (!writes) return;
  append_summary((fs::path(o.output) / "summary.csv").string(), row);
  events->add_scalar("memory/resident_mib", resident_mib, row.epoch);
  events->add_scalar("train/data_wait_percent", data_wait_percent, row.epoch);
  if (evaluated) {
    events->add_scalar("eval/loss", row.eval_loss, row.epoch);
    events->add_scalar("eval/top1", row.eval_top1, row.epoch);
    events->add_scalar("eval/top5", row.eval_top5, row.epoch);
  }
  events->flush();
  save_checkpoint(row.epoch, row.eval_top1, evaluated);
}

// The weights and everything a resume needs to continue bit-exactly: the optimizer, EMA and loss
// scaler state, the dropout generator's position and the update count.
void Trainer::State::save_checkpoint(int64_t epoch, double top1, bool evaluated) {
  nn::NamedTensors state = with_prefix("optimizer.", optimizer->state_dict());
  if (ema)
    for (auto& entry : with_prefix("ema.", ema->state_dict())) state.push_back(std::move(entry));
  if (scaler)
    for (auto& entry : with_prefix("amp.", scaler->state_dict())) state.push_back(std::move(entry));
  state.emplace_back("rng.seed", scalar_i64(static_cast<int64_t>(default_generator().seed())));
  state.emplace_back("rng.offset", scalar_i64(static_cast<int64_t>(default_generator().offset())));
  state.emplace_back("trainer.global_step", scalar_i64(global_step));
  std::map<std::string, std::string> metadata;
  if (!model.model_file().empty()) metadata[kModelFileKey] = model.model_file();  // the weights rebuild their model
  if (saver->save(epoch, top1, model.state_dict(), state, metadata) && evaluated)
    log(text("  new best top1 %.2f%% -> %s", top1, saver->weights_path("model_best").c_str()));
}

Trainer::Trainer(std::shared_ptr<models::Model> model, std::shared_ptr<const data::Dataset> train_set,
                 std::shared_ptr<const data::Dataset> eval_set, TrainOptions options)
    : model_(model) {
  TS_CHECK(model != nullptr && train_set != nullptr && eval_set != nullptr, "Trainer: model and datasets are required");
  s_ = std::make_unique<State>(std::move(model), std::move(train_set), std::move(eval_set), std::move(options));
}

Trainer::~Trainer() = default;

bool Trainer::cuda_graph_captured() const { return s_->step_graph && s_->step_graph->captured(); }

std::string Trainer::cuda_graph_fallback() const {
  return s_->step_graph ? s_->step_graph->fallback_reason() : std::string();
}

int64_t Trainer::start_epoch() const { return s_->start_epoch; }

std::vector<SummaryRow> Trainer::fit() { return s_->fit(); }

}  // namespace tessera::train
