// `tessera train`'s option table; see tools/cli/train_options.h.
#include "tools/cli/train_options.h"

#include <algorithm>
#include <sstream>

#include "tools/cli/model_flags.h"

namespace tessera::cli {

namespace {

using train::TrainOptions;

// A row that sets the TrainOptions member at `path`; `member` names it for the docs.
template <class... Path>
TrainOption bound(std::string flag, std::string metavar, std::string help, const std::string& member, Path... path) {
  return cli::bound<TrainOptions>(std::move(flag), std::move(metavar), std::move(help), "TrainOptions::" + member,
                                  path...);
}

// A row the command reads itself (not a TrainOptions member): its type and default are given here.
TrainOption unbound(std::string flag, std::string metavar, std::string help, std::string consumer, ConfigType type,
                    std::string default_value = "") {
  return cli::unbound<TrainOptions>(std::move(flag), std::move(metavar), std::move(help), std::move(consumer), type,
                                    std::move(default_value));
}

std::vector<TrainOption> make_table() {
  using O = TrainOptions;
  using L = data::LoaderOptions;
  using M = data::MixupOptions;
  using T = data::TransformOptions;
  using C = ConfigType;
  return {
      unbound("--train-split", "NAME", "training split", "run_train: the training set", C::String, "train"),
      unbound("--val-split", "NAME", "evaluation split", "run_train: the evaluation set", C::String, "validation"),
      bound("--epochs", "N", "epochs to train", "epochs", &O::epochs),
      with_alias(bound("--batch-size", "B", "images per step and process (timm's -b)", "loader.batch_size", &O::loader,
                       &L::batch_size),
                 "-b"),
      bound("--grad-accum-steps", "K", "batches whose gradients add up before each update", "grad_accum_steps",
            &O::grad_accum_steps),
      // ---- optimizer
      bound("--opt", "NAME", "optimizer: adamw, adam, sgd, nesterov, momentum", "opt", &O::opt),
      bound("--opt-eps", "EPS", "optimizer epsilon (default: the optimizer's, 1e-8)", "opt_eps", &O::opt_eps),
      bound("--opt-betas", "B1 B2", "Adam(W) betas (default: the optimizer's, 0.9 0.999)", "opt_betas", &O::opt_betas),
      bound("--layer-decay", "F",
            "layer-wise lr decay: layer i of L trains at lr * F^(L-1-i), the head at lr (default: off)", "layer_decay",
            &O::layer_decay),
      bound("--lr", "LR", "peak learning rate", "lr", &O::lr),
      bound("--weight-decay", "WD", "weight decay (not on biases, norms, position/class tokens, gammas, temperatures)",
            "weight_decay", &O::weight_decay),
      bound("--momentum", "M", "SGD momentum", "momentum", &O::momentum),
      null_when(bound("--clip-grad", "NORM", "clip gradients to this global norm (0: off)", "clip_grad", &O::clip_grad),
                "0"),
      // ---- schedule
      bound("--sched", "NAME", "learning-rate schedule: cosine, step, constant", "sched", &O::sched),
      bound("--warmup-epochs", "N", "linear warm-up epochs", "warmup_epochs", &O::warmup_epochs),
      bound("--warmup-lr", "LR", "learning rate at the start of the warm-up", "warmup_lr", &O::warmup_lr),
      bound("--min-lr", "LR", "floor of the cosine schedule", "min_lr", &O::min_lr),
      bound("--decay-epochs", "N", "step schedule: epochs between decays", "decay_epochs", &O::decay_epochs),
      bound("--decay-rate", "R", "step schedule: factor per decay", "decay_rate", &O::decay_rate),
      bound("--cooldown-epochs", "N", "cosine: epochs at --min-lr after --epochs (the run lasts epochs + N)",
            "cooldown_epochs", &O::cooldown_epochs),
      // ---- loss and mixing
      bound("--smoothing", "EPS", "label smoothing", "smoothing", &O::smoothing),
      bound("--mixup", "ALPHA", "Mixup alpha (0: off)", "mixup.mixup_alpha", &O::mixup, &M::mixup_alpha),
      bound("--cutmix", "ALPHA", "CutMix alpha (0: off)", "mixup.cutmix_alpha", &O::mixup, &M::cutmix_alpha),
      bound("--mixup-prob", "P", "probability of mixing a batch", "mixup.prob", &O::mixup, &M::prob),
      bound("--mixup-switch-prob", "P", "probability of CutMix instead of Mixup when both are on", "mixup.switch_prob",
            &O::mixup, &M::switch_prob),
      bound("--mixup-mode", "MODE", "batch, pair or elem", "mixup.mode", &O::mixup, &M::mode),
      // ---- augmentation
      bound("--primary", "KIND",
            "training crop: rrc (RandomResizedCrop), crop_pad (random crop of a padded image, for 28x28 / 32x32 "
            "data) or none",
            "train_transform.primary", &O::train_transform, &T::primary),
      bound("--crop-padding", "PX", "crop_pad: pixels of padding on each side, i.e. the largest shift",
            "train_transform.crop_padding", &O::train_transform, &T::crop_padding),
      bound("--crop-padding-mode", "MODE", "crop_pad: constant (0), reflect or edge",
            "train_transform.crop_padding_mode", &O::train_transform, &T::crop_padding_mode),
      bound("--scale", "LO,HI", "RandomResizedCrop area range", "train_transform.scale", &O::train_transform,
            &T::scale),
      bound("--hflip", "P", "horizontal flip probability", "train_transform.hflip", &O::train_transform, &T::hflip),
      bound("--color-jitter", "S", "color jitter strength (off when --aa is set)", "train_transform.color_jitter",
            &O::train_transform, &T::color_jitter),
      null_when(bound("--aa", "POLICY", "RandAugment policy, e.g. rand-m9-mstd0.5-inc1 (empty: none)",
                      "train_transform.auto_augment", &O::train_transform, &T::auto_augment),
                ""),
      bound("--train-interpolation", "MODE", "training resize: bilinear, bicubic or random",
            "train_transform.interpolation", &O::train_transform, &T::interpolation),
      bound("--reprob", "P", "random erasing probability", "train_transform.reprob", &O::train_transform, &T::reprob),
      bound("--aug-repeats", "N", "repeated augmentation: each image N times per epoch (0: off)", "loader.repeats",
            &O::loader, &L::repeats),
      // ---- weights
      bound("--model-ema", "", "keep an exponential moving average of the weights and evaluate it", "model_ema",
            &O::model_ema),
      bound("--model-ema-decay", "D", "EMA decay per update", "model_ema_decay", &O::model_ema_decay),
      unbound("--pretrained-weights", "FILE",
              "start from these weights (.safetensors or a PyTorch .pth/.bin); a classifier of another size is "
              "re-initialized",
              "run_train: loaded into the model", C::String),
      bound("--seed", "S", "random seed (weights, data order, augmentation, dropout)", "seed", &O::seed),
      // ---- the run folder
      bound("--output", "DIR",
            "run folder: args.yaml, summary.csv, TensorBoard events, checkpoints (empty: output/train/<time>-<model>)",
            "output", &O::output),
      bound("--resume", "PATH", "continue a run from a checkpoint file or a run folder", "resume", &O::resume),
      bound("--initial-checkpoint", "PATH",
            "start from these weights (a checkpoint, a run folder's newest, or a .safetensors or PyTorch .pth/.bin of "
            "this model); no "
            "optimizer or schedule state",
            "initial_checkpoint", &O::initial_checkpoint),
      bound("--start-epoch", "N", "first epoch to train, overriding a resumed checkpoint's (the schedule starts there)",
            "start_epoch", &O::start_epoch),
      bound("--log-interval", "N", "steps (evaluation: batches) between progress lines", "log_interval",
            &O::log_interval),
      bound("--val-interval", "N", "evaluate every N epochs and after the last", "val_interval", &O::val_interval),
      unbound("--log-wandb", "",
              "accepted for timm's scripts: wandb logging is not available, the run goes on without it",
              "run_train: a notice", C::Switch),
      bound("--checkpoint-hist", "N", "numbered checkpoints to keep", "checkpoint_hist", &O::checkpoint_hist),
      threads_row<O>("run_train: set_num_threads"),
      bound("--max-train-batches", "N", "shorter epochs: at most N batches (0: all)", "max_train_batches",
            &O::max_train_batches),
      bound("--max-eval-batches", "N", "evaluate on at most N batches (0: all)", "max_eval_batches",
            &O::max_eval_batches),
      // ---- data parallel: launched by mpirun or srun (docs/distributed.md)
      unbound("--dist-backend", "NAME", "collectives between processes: auto (nccl on cuda, mpi on cpu), mpi or nccl",
              "run_train: the communicator", C::String, "auto"),
      unbound("--dist-timeout", "S", "seconds a rank waits on the others before ending the job",
              "run_train: the communicator", C::Float, "300"),
      bound("--sync-bn", "", "batch norm statistics over the processes' whole batch (timm's --sync-bn)", "sync_bn",
            &O::sync_bn),
      // ---- the training step (`tessera bench --mode train` declares these two as well)
      unbound("--grad-checkpointing", "",
              "keep only each block's input for the backward pass and recompute the rest there: much less memory, "
              "about a third more compute",
              "run_train: Model::grad_checkpointing", C::Switch),
      bound("--cuda-graph", "",
            "on cuda, record the training step once as a CUDA Graph and replay it: one launch per step (falls back to "
            "eager steps, saying why, where the step cannot be captured)",
            "cuda_graph", &O::cuda_graph),
  };
}

}  // namespace

const std::vector<TrainOption>& train_option_table() {
  static const std::vector<TrainOption> table = make_table();
  return table;
}

void add_train_options(ArgParser& p) { add_options(p, train_option_table()); }

void add_train_step_options(ArgParser& p) {
  const train::TrainOptions defaults;
  for (const TrainOption& row : train_option_table())
    if (row.flag == "--grad-checkpointing" || row.flag == "--cuda-graph") row.declare(p, row.default_text(defaults));
}

void apply_train_options(const ArgParser& p, train::TrainOptions& o) { apply_options(p, train_option_table(), o); }

namespace {

// Text for a cell of a Markdown table: '|' escaped, so that it does not end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

const char* type_name(ConfigType type) {
  switch (type) {
    case ConfigType::Int: return "int";
    case ConfigType::Float: return "float";
    case ConfigType::String: return "string";
    case ConfigType::Switch:
    case ConfigType::OnOff: return "bool";
    case ConfigType::Numbers:
    case ConfigType::NumberArgs: return "list of numbers";
    case ConfigType::Kwargs: return "mapping";
    case ConfigType::Amp: return "bool or dtype";
  }
  return "";
}

}  // namespace

std::string flags_markdown(const ArgParser& p, const std::vector<ConfigKey>& keys,
                           const std::function<std::string(const std::string& dest)>& consumer) {
  std::ostringstream out;
  out << "| flag | args.yaml key | default | goes to | meaning |\n|---|---|---|---|---|\n";
  for (const ArgParser::Help& h : p.help_entries()) {
    const auto key = std::find_if(keys.begin(), keys.end(), [&](const ConfigKey& k) { return k.dest == h.dest; });
    out << "| `" << cell(h.flag) << "` | ";
    if (key != keys.end()) out << "`" << key->dest << "` (" << type_name(key->type) << ")";
    out << " | ";
    if (!h.default_value.empty()) out << '`' << cell(h.default_value) << '`';
    out << " | " << cell(consumer(h.dest)) << " | " << cell(h.help) << " |\n";
  }
  return out.str();
}

}  // namespace tessera::cli
