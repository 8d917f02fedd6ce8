// The training loop; see train/trainer.h.
#include "tessera/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "tessera/core/backend.h"
#include "tessera/core/process_memory.h"
#include "tessera/data/mixup.h"
#include "tessera/ops/ops.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/distributed/agreement.h"
#include "tessera/train/distributed/communicator.h"
#include "tessera/train/distributed/reducer.h"
#include "tessera/train/distributed/sync_batch_norm.h"
#include "tessera/train/ema.h"
#include "tessera/train/grad_scaler.h"
#include "tessera/train/layer_decay.h"
#include "tessera/train/optimizer.h"
#include "tessera/train/scheduler.h"
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
  const int64_t batches = max_batches > 0 ? std::min(max_batches, loader.batches_per_epoch()) : loader.batches_per_epoch();
  const bool tty = progress.log_interval > 0 && isatty(STDERR_FILENO);
  const auto start = Clock::now();
  int64_t seen = 0;  // this process's samples, padding included: the work done
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    if (max_batches > 0 && batch->index >= max_batches) break;
    std::optional<AutocastGuard> autocast;
    if (amp) autocast.emplace(device.type, *amp);
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
      const double running_top1 = r.samples > 0 ? 100.0 * static_cast<double>(top1) / static_cast<double>(r.samples) : 0;
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

struct Trainer::State {
  TrainOptions o;
  std::unique_ptr<data::DataLoader> train_loader, eval_loader;
  std::unique_ptr<Optimizer> optimizer;
  std::optional<LrScheduler> scheduler;
  std::unique_ptr<ModelEma> ema;
  std::unique_ptr<GradScaler> scaler;  // float16 mixed precision
  std::optional<data::Mixup> mixup;
  std::unique_ptr<CheckpointSaver> saver;
  std::unique_ptr<SummaryWriter> events;
  std::unique_ptr<dist::GradReducer> reducer;  // data parallel: averages the gradients
  int rank = 0, world = 1;
  bool writes = false;  // this process writes the run folder (rank 0)
  int64_t steps_per_epoch = 0;  // updates; each takes grad_accum_steps batches
  int64_t start_epoch = 0;
  int64_t end_epoch = 0;    // epochs + cooldown_epochs (cosine)
  int64_t global_step = 0;  // optimizer updates done
  bool tty = false;

  void log(const std::string& line) const {
    if (o.verbose) std::fprintf(stderr, "%s\n", line.c_str());
  }
  // The progress of evaluation `label` as this run prints it (silent when not verbose).
  EvalProgress eval_progress(const char* label) const { return {o.verbose ? std::max<int64_t>(o.log_interval, 1) : 0, label}; }
};

Trainer::Trainer(std::shared_ptr<models::Model> model, std::shared_ptr<const data::Dataset> train_set,
                 std::shared_ptr<const data::Dataset> eval_set, TrainOptions options)
    : s_(std::make_unique<State>()), model_(std::move(model)) {
  State& s = *s_;
  s.o = std::move(options);
  const TrainOptions& o = s.o;
  TS_CHECK(model_ != nullptr && train_set != nullptr && eval_set != nullptr, "Trainer: model and datasets are required");
  TS_CHECK(o.epochs > 0 && o.loader.batch_size > 0, "Trainer: epochs and batch size must be positive, got ", o.epochs, " and ",
           o.loader.batch_size);
  TS_CHECK(train_set->size() >= o.loader.batch_size, "Trainer: the training set has ", train_set->size(),
           " samples, fewer than one batch of ", o.loader.batch_size);
  TS_CHECK(o.grad_accum_steps >= 1, "--grad-accum-steps: expected at least 1, got ", o.grad_accum_steps);
  TS_CHECK(o.val_interval >= 1, "--val-interval: expected at least 1 (evaluate every N epochs), got ", o.val_interval);
  TS_CHECK(o.cooldown_epochs >= 0, "--cooldown-epochs: expected at least 0, got ", o.cooldown_epochs);
  s.end_epoch = o.epochs + (o.sched == "cosine" ? o.cooldown_epochs : 0);
  TS_CHECK(!o.start_epoch || (*o.start_epoch >= 0 && *o.start_epoch < s.end_epoch), "--start-epoch: expected an epoch in [0, ",
           s.end_epoch, "), got ", o.start_epoch.value_or(0));
  if (o.comm) {
    s.rank = o.comm->rank();
    s.world = o.comm->size();
    dist::check_agreement(*o.comm, run_facts(o, *model_, *train_set, *eval_set));
    s.o.verbose = o.verbose && s.rank == 0;  // one voice; errors still come from every rank
  }
  s.tty = o.verbose && isatty(STDERR_FILENO);

  // Data: training batches are all full (timm drops the last partial batch), so Mixup always has
  // partners and every step has the same size.
  const int64_t img = model_->default_img_size;
  data::TransformOptions train_tf = o.train_transform, eval_tf = o.eval_transform;
  train_tf.img_size = eval_tf.img_size = img;
  train_tf.is_training = true;
  eval_tf.is_training = false;
  data::LoaderOptions train_lo = o.loader;
  train_lo.shuffle = true;
  train_lo.drop_last = true;
  train_lo.seed = o.seed;
  train_lo.verbose = o.verbose;
  train_lo.rank = s.rank;
  train_lo.world_size = s.world;
  // Batches bound for a GPU are decoded into pinned host memory, so the copy of each batch to the
  // device is asynchronous: the host goes on queuing the step's kernels (cuda/memory.cpp).
  if (Allocator* pinned = pinned_host_allocator(model_->device().type))
    train_lo.allocate = [pinned](const Shape& shape, DType dtype) {
      return Tensor::empty(shape, dtype, Device::cpu(), *pinned);
    };
  data::LoaderOptions eval_lo = train_lo;
  eval_lo.shuffle = false;
  eval_lo.drop_last = false;
  eval_lo.repeats = 0;
  s.train_loader = std::make_unique<data::DataLoader>(train_set, data::create_transform(train_tf), train_lo);
  s.eval_loader = std::make_unique<data::DataLoader>(eval_set, data::create_transform(eval_tf), eval_lo);
  int64_t batches = s.train_loader->batches_per_epoch();
  if (o.max_train_batches > 0) batches = std::min(batches, o.max_train_batches);
  s.steps_per_epoch = batches / o.grad_accum_steps;  // a trailing partial accumulation is dropped
  TS_CHECK(s.steps_per_epoch > 0, "Trainer: an epoch has ", batches, " batches of ", o.loader.batch_size, " per process, "
           "fewer than one update of --grad-accum-steps ", o.grad_accum_steps);

  if (o.mixup.mixup_alpha > 0 || o.mixup.cutmix_alpha > 0 || o.mixup.cutmix_minmax) {
    data::MixupOptions m = o.mixup;
    m.label_smoothing = o.smoothing;
    m.num_classes = model_->num_classes;
    s.mixup.emplace(m);
  }

  // Optimization: lengths of the schedule in updates (timm's --sched-on-updates).
  if (o.comm) {
    // Every rank starts from rank 0's weights and buffers (a resumed run then loads the same
    // checkpoint on every rank).
    NoGradGuard no_grad;
    for (const auto& [name, t] : model_->state_dict()) o.comm->broadcast(t, 0);
    if (o.sync_bn) dist::convert_sync_batchnorm(*model_, o.comm);
    s.reducer = std::make_unique<dist::GradReducer>(*o.comm, model_->parameters(), o.bucket_bytes);
  }
  if (!o.initial_checkpoint.empty()) {
    // Before the EMA copies the model and before a resume, which replaces these weights.
    const nn::LoadReport report =
        model_->load_state_dict(model_->adapt_state_dict(load_initial_weights(o.initial_checkpoint)), /*strict=*/false);
    TS_CHECK(report.missing.empty() && report.unexpected.empty() && report.mismatched.empty(), "--initial-checkpoint ",
             o.initial_checkpoint, " does not fit the model: ", report.str());
    s.log("initial weights from " + o.initial_checkpoint);
  }
  std::vector<ParamGroup> groups = o.layer_decay ? param_groups_layer_decay(*model_, o.weight_decay, *o.layer_decay)
                                                 : param_groups(*model_, o.weight_decay);
  s.optimizer = create_optimizer(o.opt, std::move(groups), o.lr, o.momentum, o.opt_eps, o.opt_betas);
  ScheduleOptions so;
  so.lr = o.lr;
  so.total_steps = o.epochs * s.steps_per_epoch;
  so.warmup_steps = static_cast<int64_t>(std::llround(o.warmup_epochs * static_cast<double>(s.steps_per_epoch)));
  so.warmup_lr = o.warmup_lr;
  so.min_lr = o.min_lr;
  so.decay_steps = std::max<int64_t>(1, std::llround(o.decay_epochs * static_cast<double>(s.steps_per_epoch)));
  so.decay_rate = o.decay_rate;
  s.scheduler.emplace(create_scheduler(o.sched, so));
  if (o.model_ema) s.ema = std::make_unique<ModelEma>(*model_, o.model_ema_decay);
  if (o.amp) {
    TS_CHECK(!model_->device().is_cpu(), "train: mixed precision (", dtype_name(*o.amp),
             ") runs on cuda only; the model is on ", model_->device().str(), " (train there in float32)");
    AutocastGuard check(model_->device().type, *o.amp);  // refuses anything but bfloat16/float16
    if (*o.amp == DType::Float16) s.scaler = std::make_unique<GradScaler>();
  }
  set_allow_tf32(o.tf32);
  // Each rank its own dropout and drop-path stream (timm: seed + rank); rank 0's is a single
  // process's.
  manual_seed(o.seed + static_cast<uint64_t>(s.rank));

  if (!o.resume.empty()) {
    std::string path = o.resume;
    if (fs::is_directory(path)) {
      const auto found = find_resume(path);
      TS_CHECK(found.has_value(), "resume: no complete checkpoint in ", path);
      path = *found;
    }
    const CheckpointData ck = load_checkpoint(path);
    model_->load_state_dict(ck.weights);
    s.optimizer->load_state_dict(strip_prefix("optimizer.", ck.state));
    if (s.ema) {
      const nn::NamedTensors ema_state = strip_prefix("ema.", ck.state);
      TS_CHECK(!ema_state.empty(), "resume: ", path, " has no EMA state but --model-ema is on");
      s.ema->load_state_dict(ema_state);
    }
    if (s.scaler) {
      const nn::NamedTensors amp_state = strip_prefix("amp.", ck.state);
      if (!amp_state.empty()) s.scaler->load_state_dict(amp_state);  // a float32 run resumed in float16 starts afresh
    }
    // The checkpoint holds rank 0's stream; every rank advanced its own by the same amount.
    default_generator().seed(static_cast<uint64_t>(state_scalar(ck, "rng.seed")) + static_cast<uint64_t>(s.rank));
    default_generator().set_offset(static_cast<uint64_t>(state_scalar(ck, "rng.offset")));
    s.global_step = state_scalar(ck, "trainer.global_step");
    s.start_epoch = ck.epoch + 1;
    s.log(text("resumed from %s (epoch %lld done, %lld updates)", path.c_str(), static_cast<long long>(ck.epoch),
               static_cast<long long>(s.global_step)));
  }
  if (o.start_epoch) {
    // As timm steps its scheduler to the start epoch: the schedule resumes at that epoch's start.
    s.start_epoch = *o.start_epoch;
    s.global_step = s.start_epoch * s.steps_per_epoch;
  }

  s.writes = !o.output.empty() && s.rank == 0;
  if (s.writes) {
    fs::create_directories(o.output);
    write_args_yaml((fs::path(o.output) / "args.yaml").string(), o.settings);
    s.saver = std::make_unique<CheckpointSaver>(o.output, o.checkpoint_hist, "top1", true);
    s.events = std::make_unique<SummaryWriter>(o.output);
    if (s.start_epoch > 0) truncate_summary((fs::path(o.output) / "summary.csv").string(), s.start_epoch - 1);
  }
}

Trainer::~Trainer() = default;

int64_t Trainer::start_epoch() const { return s_->start_epoch; }

std::vector<SummaryRow> Trainer::fit() {
  State& s = *s_;
  const TrainOptions& o = s.o;
  models::Model& model = *model_;
  std::vector<SummaryRow> rows;
  const std::vector<Tensor> params = s.optimizer->parameters();
  // The parameters' EMA tensors, offered to each update (an optimizer that fuses the EMA into its
  // own pass moves them; Optimizer::step(const UpdateOptions&)).
  const std::vector<Tensor> param_emas = s.ema ? emas_of_parameters(*s.optimizer, *s.ema) : std::vector<Tensor>();
  const Device device = model.device();  // batches are made on the host and moved there

  const int64_t end = o.stop_after > 0 ? std::min(s.end_epoch, s.start_epoch + o.stop_after) : s.end_epoch;
  for (int64_t epoch = s.start_epoch; epoch < end; ++epoch) {
    model.train();
    s.train_loader->start_epoch(epoch);
    double loss_sum = 0;
    int64_t images = 0;  // this process's; the job's are world times as many
    const double waited_before = s.reducer ? s.reducer->wait_seconds() : 0.0;
    const auto epoch_start = Clock::now();
    for (int64_t step = 0; step < s.steps_per_epoch; ++step) {
      const double lr = s.scheduler->lr_at(s.global_step);
      s.optimizer->set_lr(lr);

      // grad_accum_steps micro-batches, their gradients summed; in a data-parallel job only the
      // last one's backward sends them (and finish() completes the average).
      double loss_value = 0;
      for (int64_t micro = 0; micro < o.grad_accum_steps; ++micro) {
        const int64_t index = step * o.grad_accum_steps + micro;  // batch of the epoch
        std::optional<data::Batch> batch = s.train_loader->next();
        TS_CHECK(batch.has_value(), "train: the loader ended epoch ", epoch, " after ", index, " of ",
                 s.steps_per_epoch * o.grad_accum_steps, " batches");
        Tensor loss;
        {
          std::optional<AutocastGuard> autocast;
          if (o.amp) autocast.emplace(device.type, *o.amp);
          if (s.mixup) {
            // The mixing stream of a batch depends only on (seed, rank, epoch, batch), like the loader's.
            data::SampleRng rng((o.seed + static_cast<uint64_t>(s.rank)) ^ 0x6D69787570ull,
                                static_cast<uint64_t>(epoch), static_cast<uint64_t>(index));
            const Tensor targets = (*s.mixup)(batch->images, batch->labels, rng);
            loss = soft_cross_entropy(model.forward(batch->images.to(device)), targets.to(device));
          } else {
            loss = cross_entropy(model.forward(batch->images.to(device)), batch->labels.to(device), o.smoothing);
          }
        }
        const double micro_loss = loss.item();
        if (!std::isfinite(micro_loss)) {
          throw Error("train: the loss is " + std::string(std::isnan(micro_loss) ? "NaN" : "infinite") + " at epoch " +
                      std::to_string(epoch) + ", step " + std::to_string(step) + " (update " +
                      std::to_string(s.global_step) + ", lr " + std::to_string(lr) +
                      "); stopping before it reaches the weights. " + last_good_checkpoint(o.output) +
                      "; try a lower --lr or --clip-grad.");
        }
        loss_value += micro_loss / static_cast<double>(o.grad_accum_steps);
        images += batch->images.size(0);
        if (o.grad_accum_steps > 1) loss = loss / static_cast<double>(o.grad_accum_steps);
        if (s.reducer) s.reducer->prepare(micro + 1 == o.grad_accum_steps);
        (s.scaler ? s.scaler->scale(loss) : loss).backward();
      }
      // The averaged gradients are complete here, before clipping computes their norm.
      if (s.reducer) s.reducer->finish();
      // float16: gradients that overflowed (the loss scale was too large) skip this update.
      const bool finite = !s.scaler || s.scaler->unscale_(params);
      std::vector<Tensor> averaged;  // EMA tensors the optimizer step moved itself
      if (finite) {
        UpdateOptions update{o.clip_grad, param_emas, 0.0};
        if (s.ema) update.ema_weight = s.ema->weight_at(s.global_step + 1);  // the update about to be made
        averaged = s.optimizer->step(update);
      }
      s.optimizer->zero_grad();
      ++s.global_step;
      if (s.scaler) {
        s.scaler->update(finite);
        if (!finite && o.verbose)
          progress_line(text("Train: %lld [%lld] float16 gradients overflowed: update skipped, loss scale now %g",
                             static_cast<long long>(epoch), static_cast<long long>(step + 1), s.scaler->scale_value()),
                        s.tty, true);
      }
      if (s.ema && finite) s.ema->update(model, s.global_step, averaged);

      loss_sum += loss_value;
      const bool last = step + 1 == s.steps_per_epoch;
      const bool log_now = (step + 1) % std::max<int64_t>(o.log_interval, 1) == 0 || last;
      if (s.events && log_now) {
        s.events->add_scalar("train/loss", loss_value, s.global_step);
        s.events->add_scalar("train/lr", lr, s.global_step);
        if (s.scaler) s.events->add_scalar("train/loss_scale", s.scaler->scale_value(), s.global_step);
      }
      if (o.verbose && (s.tty || log_now)) {
        const double elapsed = seconds_since(epoch_start);
        const double eta = elapsed / static_cast<double>(step + 1) * static_cast<double>(s.steps_per_epoch - step - 1);
        progress_line(text("Train: %lld [%5lld/%lld (%3.0f%%)]  loss %.4f (%.4f)  lr %.3e  %.1f img/s  eta %s",
                           static_cast<long long>(epoch), static_cast<long long>(step + 1),
                           static_cast<long long>(s.steps_per_epoch),
                           100.0 * static_cast<double>(step + 1) / static_cast<double>(s.steps_per_epoch), loss_value,
                           loss_sum / static_cast<double>(step + 1), lr,
                           static_cast<double>(images * s.world) / elapsed, duration_text(eta).c_str()),
                      s.tty, last);
      }
    }
    const double train_seconds = seconds_since(epoch_start);
    const double comm_wait = s.reducer ? s.reducer->wait_seconds() - waited_before : 0.0;
    if (o.comm) {
      // The job's mean training loss; and without --sync-bn, the ranks' batch-norm statistics
      // averaged before evaluation and checkpointing (timm's --dist-bn reduce).
      loss_sum = sum_over_ranks(o.comm.get(), {loss_sum})[0] / static_cast<double>(s.world);
      if (!o.sync_bn) {
        NoGradGuard no_grad;
        for (const auto& [name, t] : model.named_buffers())
          if (is_floating(t.dtype())) o.comm->allreduce(t, dist::ReduceOp::Avg);
      }
    }

    // Evaluation, every val_interval epochs and after the last: with EMA on, the averaged weights
    // are what is reported and checkpointed as the run's metric (as timm does); the live weights
    // are restored afterwards. An epoch not evaluated reports NaN.
    const bool evaluates = (epoch + 1) % o.val_interval == 0 || epoch + 1 == s.end_epoch;
    EvalResult eval{NAN, NAN, NAN, 0};
    if (evaluates) {
      eval = evaluate(model, *s.eval_loader, o.max_eval_batches, o.amp, o.comm.get(), s.eval_progress("Test"));
      if (s.ema) {
        nn::NamedTensors live;
        for (const auto& [name, t] : model.state_dict()) live.emplace_back(name, t.clone());
        s.ema->copy_to(model);
        const EvalResult ema_eval =
            evaluate(model, *s.eval_loader, o.max_eval_batches, o.amp, o.comm.get(), s.eval_progress("Test (EMA)"));
        model.load_state_dict(live);
        s.log(text("Eval %lld: loss %.4f top1 %.2f top5 %.2f (EMA: loss %.4f top1 %.2f top5 %.2f)",
                   static_cast<long long>(epoch), eval.loss, eval.top1, eval.top5, ema_eval.loss, ema_eval.top1,
                   ema_eval.top5));
        eval = ema_eval;
      } else {
        s.log(text("Eval %lld: loss %.4f top1 %.2f top5 %.2f", static_cast<long long>(epoch), eval.loss, eval.top1,
                   eval.top5));
      }
    }
    SummaryRow row{epoch, loss_sum / static_cast<double>(s.steps_per_epoch), eval.loss, eval.top1, eval.top5,
                   s.optimizer->lr()};
    rows.push_back(row);
    // Resident memory after each epoch (training, evaluation): flat over a long run unless
    // something leaks (docs/reliability.md, "Long runs").
    const double resident_mib = static_cast<double>(resident_bytes()) / (1024.0 * 1024.0);
    s.log(text("Epoch %lld done in %s (%.1f img/s, %.0f MiB resident): train loss %.4f, eval top1 %s",
               static_cast<long long>(epoch), duration_text(train_seconds).c_str(),
               static_cast<double>(images * s.world) / train_seconds, resident_mib, row.train_loss,
               evaluates ? text("%.2f%%", eval.top1).c_str() : "not measured (--val-interval)"));
    if (o.comm)
      s.log(text("  %d ranks (%s): %.1f%% of the training time waiting on gradient communication", s.world,
                 o.comm->backend().c_str(), 100.0 * comm_wait / train_seconds));

    if (s.writes) {
      append_summary((fs::path(o.output) / "summary.csv").string(), row);
      s.events->add_scalar("memory/resident_mib", resident_mib, epoch);
      if (evaluates) {
        s.events->add_scalar("eval/loss", eval.loss, epoch);
        s.events->add_scalar("eval/top1", eval.top1, epoch);
        s.events->add_scalar("eval/top5", eval.top5, epoch);
      }
      s.events->flush();
      nn::NamedTensors state = with_prefix("optimizer.", s.optimizer->state_dict());
      if (s.ema)
        for (auto& entry : with_prefix("ema.", s.ema->state_dict())) state.push_back(std::move(entry));
      if (s.scaler)
        for (auto& entry : with_prefix("amp.", s.scaler->state_dict())) state.push_back(std::move(entry));
      state.emplace_back("rng.seed", scalar_i64(static_cast<int64_t>(default_generator().seed())));
      state.emplace_back("rng.offset", scalar_i64(static_cast<int64_t>(default_generator().offset())));
      state.emplace_back("trainer.global_step", scalar_i64(s.global_step));
      if (s.saver->save(epoch, eval.top1, model.state_dict(), state) && evaluates)
        s.log(text("  new best top1 %.2f%% -> %s", eval.top1, s.saver->weights_path("model_best").c_str()));
    }
  }
  return rows;
}

}  // namespace tessera::train
