// The training loop: epochs of forward, loss, backward, clipping, optimizer and EMA updates over a
// DataLoader, evaluation after each epoch, and the run's output folder (args.yaml, summary.csv,
// TensorBoard events, checkpoints) as timm's train.py keeps it, plus model.yaml: the model's file
// (Model::model_file), also recorded in every checkpoint's metadata (train/checkpoint.h).
//
//   train::TrainOptions o;  o.epochs = 10;  o.output = "runs/fmnist";
//   train::Trainer trainer(model, train_set, eval_set, o);
//   trainer.fit();
//
// Determinism and resume. Every random draw is a pure function of the seed and the position in
// the run: the loader's order and augmentation (seed, epoch, sample; data/loader.h), Mixup/CutMix
// (seed, epoch, batch), dropout and drop-path (the default generator, whose offset is saved).
// Checkpoints are written at the end of each epoch with the optimizer, EMA and generator state,
// so `resume` continues bit-exactly: N epochs + resume + M epochs give the weights of N + M.
//
// Failure. A NaN or infinite loss stops the run with an error naming the epoch and step, before
// the bad gradients reach the weights; the checkpoints already written stay as they are. (Under
// float16 mixed precision, gradients that overflow while the loss is finite are the loss scaler's
// business: that step is skipped, as timm does.)
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/autocast.h"
#include "tessera/data/dataset.h"
#include "tessera/data/loader.h"
#include "tessera/data/mixup.h"
#include "tessera/data/pipeline.h"
#include "tessera/models/model.h"
#include "tessera/train/output.h"

namespace tessera::train {

// The run folder's copy of the model's file (models/model_file.h), when the model has one.
inline constexpr const char* kModelFileName = "model.yaml";

namespace dist {
class Communicator;
}

// The options of a run. The data, augmentation and mixing options are the structs of the parts
// that consume them, held whole (the command line's option table, tools/cli/train_options.h, binds
// each flag to its member, so every default below is the flag's default too).
struct TrainOptions {
  // ---- data -----------------------------------------------------------------------------------
  data::TransformOptions train_transform;  // img_size and is_training are set by Trainer
  data::TransformOptions eval_transform;
  // The training loader: batch_size (per process, timm's -b), workers, strict (a corrupt image is
  // an error), repeats (timm's --aug-repeats). Trainer sets the rest: shuffling, drop_last, seed,
  // the rank's shard, verbosity, pinned memory; evaluation uses the same batch size and workers.
  data::LoaderOptions loader = [] {  // timm's -b default, 128 (a bare loader's is 32)
    data::LoaderOptions l;
    l.batch_size = 128;
    return l;
  }();
  // ---- loss and mixing ------------------------------------------------------------------------
  double smoothing = 0.1;  // label smoothing, of the loss and of Mixup's targets
  // Mixup / CutMix, on when either alpha is > 0 (off by default, as timm's train.py);
  // label_smoothing and num_classes are set by Trainer (smoothing, the model's classes).
  data::MixupOptions mixup = [] {
    data::MixupOptions m;
    m.mixup_alpha = 0.0;
    return m;
  }();
  // ---- optimization ---------------------------------------------------------------------------
  int64_t epochs = 300;
  std::string opt = "adamw";
  std::optional<double> opt_eps;                   // unset: the optimizer's own (timm --opt-eps)
  std::optional<std::array<double, 2>> opt_betas;  // unset: the optimizer's own (timm --opt-betas)
  // Layer-wise lr decay (timm --layer-decay, train/layer_decay.h): unset, every layer at lr.
  std::optional<double> layer_decay;
  double lr = 5e-4;
  double weight_decay = 0.05;
  double momentum = 0.9;
  double clip_grad = 0.0;  // max global gradient norm; 0: off
  std::string sched = "cosine";
  double warmup_epochs = 5, warmup_lr = 1e-6, min_lr = 1e-5;
  double decay_epochs = 90, decay_rate = 0.1;  // step schedule
  // Cosine: epochs at min_lr after the schedule's `epochs` (timm --cooldown-epochs); the run
  // lasts epochs + cooldown_epochs. Other schedules ignore it, as timm's do.
  int64_t cooldown_epochs = 0;
  bool model_ema = false;
  double model_ema_decay = 0.9998;
  // Micro-batches per update (timm --grad-accum-steps): their gradients add up, the loss of each
  // is divided by K, and the schedule counts updates.
  int64_t grad_accum_steps = 1;
  // ---- data parallel (train/distributed/, docs/distributed.md) ---------------------------------
  // The processes of the job; null: this process trains alone. batch_size is per process (timm's
  // -b). Rank 0's weights start every rank; gradients are averaged by bucketed allreduce during
  // backward; each rank reads its shard of the data; rank 0 alone writes the run folder.
  std::shared_ptr<dist::Communicator> comm;
  bool sync_bn = false;             // batch norm over the whole batch of all ranks (timm --sync-bn)
  int64_t bucket_bytes = 25 << 20;  // gradient bucket size
  // ---- precision (cuda only) ------------------------------------------------------------------
  // Mixed precision (core/autocast.h): matmuls and convolutions in bfloat16 or float16, accumulated
  // in float32, with float32 master weights, norms, softmax and loss; float16 adds dynamic loss
  // scaling (train/grad_scaler.h): a step whose gradients overflow is skipped and logged.
  std::optional<DType> amp;
  AmpActivations amp_activations = AmpActivations::Low;  // under amp: activations low or float32 (core/autocast.h)
  bool tf32 = false;                                     // float32 GEMMs and convolutions may use TF32 tensor cores
  bool deterministic = false;  // only library algorithms whose results do not vary (set_deterministic_algorithms)
  // Each training step recorded once as a CUDA Graph and replayed (train/step_graph.h), after
  // kCudaGraphWarmup eager steps. A run the graph cannot hold (data parallel, float16 loss
  // scaling, gradient accumulation, an optimizer or EMA schedule without device-side values, or a
  // step that draws random numbers) trains eagerly and says why.
  bool cuda_graph = false;
  // ---- run --------------------------------------------------------------------------------------
  uint64_t seed = 42;
  std::string output;  // run folder; empty: no files are written
  std::string resume;  // a checkpoint file, or a run folder (its newest checkpoint)
  // Weights to start from (timm --initial-checkpoint): a checkpoint's weights file or a
  // .safetensors of this model, loaded strictly before training; no optimizer or schedule state.
  std::string initial_checkpoint;
  // The first epoch to train (timm --start-epoch), overriding a resumed checkpoint's: the
  // schedule continues from that epoch's first update. Unset: 0, or the one after the checkpoint.
  std::optional<int64_t> start_epoch;
  // Evaluate every N epochs and after the last (timm --val-interval). An epoch not evaluated still
  // writes its summary.csv row (eval columns nan) and its checkpoint (metric nan, never the best).
  int64_t val_interval = 1;
  int64_t log_interval = 50;      // steps (evaluation: batches) between progress lines on a non-terminal
  int checkpoint_hist = 10;       // numbered checkpoints kept
  int64_t stop_after = 0;         // > 0: return after this many epochs of this call, as if the run were
                                  // interrupted (the schedule still spans `epochs`)
  int64_t max_train_batches = 0;  // > 0: shorter epochs (quick runs and tests)
  int64_t max_eval_batches = 0;
  bool verbose = true;  // progress and epoch lines on stderr
  Settings settings;    // written to args.yaml
};

struct EvalResult {
  double loss = 0, top1 = 0, top5 = 0;  // mean cross-entropy; accuracies in percent
  int64_t samples = 0;
};

// Progress lines of an evaluation on stderr, as training prints them: "<label>: [  i/n]  top1 ..
// img/s  eta h:mm:ss" every log_interval batches and after the last (on a terminal, one line
// redrawn after every batch). log_interval 0: silent; the default, timm's --log-interval, is what
// `tessera validate` prints.
struct EvalProgress {
  int64_t log_interval = 50;
  std::string label = "Test";
};

// Loss, top-1 and top-5 of `model` in eval mode over the loader's epoch 0 (no gradients), under
// autocast when `amp` is set. With `comm`, each rank evaluates its shard of the set and the counts
// are summed over ranks: every sample is counted once (the padding of the shards not at all).
EvalResult evaluate(models::Model& model, data::DataLoader& loader, int64_t max_batches = 0,
                    std::optional<DType> amp = std::nullopt, dist::Communicator* comm = nullptr,
                    const EvalProgress& progress = {});

class Trainer {
 public:
  Trainer(std::shared_ptr<models::Model> model, std::shared_ptr<const data::Dataset> train_set,
          std::shared_ptr<const data::Dataset> eval_set, TrainOptions options);
  ~Trainer();
  // Trains from the first epoch not yet done (0, or the one after the resumed checkpoint) to
  // options.epochs, evaluating and checkpointing after each. Returns the rows of summary.csv
  // written by this call.
  std::vector<SummaryRow> fit();
  int64_t start_epoch() const;
  models::Model& model() { return *model_; }
  // With --cuda-graph: whether the step was captured and is replayed (else it trains eagerly).
  bool cuda_graph_captured() const;
  // Why --cuda-graph trains eagerly ("" when it captured, or was not asked for).
  std::string cuda_graph_fallback() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
  std::shared_ptr<models::Model> model_;
};

}  // namespace tessera::train
