// `tessera train`: trains a registered model on a dataset, from scratch or from pretrained
// weights, with timm's flag names (train.py) and output folder. See train/trainer.h.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>

#include "tessera/core/parallel.h"
#include "tessera/models/registry.h"
#include "tessera/io/safetensors.h"
#include "tessera/ops/ops.h"
#include "tools/cli/data_flags.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/train.h"
#include "tessera/train/distributed/communicator.h"

namespace tessera::cli {

namespace {

void add_train_options(ArgParser& p) {
  p.option("--config", "FILE", "YAML file of flag values, e.g. a run's args.yaml (timm's or Tessera's): its values "
           "become the defaults, flags given here override them", "", "-c");
  p.option("--train-split", "NAME", "training split", "train");
  p.option("--val-split", "NAME", "evaluation split", "validation");
  p.option("--epochs", "N", "epochs to train", "300");
  p.option("--batch-size", "B", "images per step and process (timm's -b)", "128", "-b");
  p.option("--grad-accum-steps", "K", "batches whose gradients add up before each update", "1");
  p.option("--opt", "NAME", "optimizer: adamw, adam, sgd, nesterov, momentum", "adamw");
  p.option("--opt-eps", "EPS", "optimizer epsilon (default: the optimizer's, 1e-8)");
  p.list_option("--opt-betas", "B1 B2", "Adam(W) betas (default: the optimizer's, 0.9 0.999)");
  p.option("--layer-decay", "F", "layer-wise lr decay: layer i of L trains at lr * F^(L-1-i), the head at lr "
           "(default: off)");
  p.option("--lr", "LR", "peak learning rate", "5e-4");
  p.option("--weight-decay", "WD", "weight decay (not on biases, norms, position/class tokens, gammas, temperatures)",
           "0.05");
  p.option("--momentum", "M", "SGD momentum", "0.9");
  p.option("--clip-grad", "NORM", "clip gradients to this global norm (0: off)", "0");
  p.option("--sched", "NAME", "learning-rate schedule: cosine, step, constant", "cosine");
  p.option("--warmup-epochs", "N", "linear warm-up epochs", "5");
  p.option("--warmup-lr", "LR", "learning rate at the start of the warm-up", "1e-6");
  p.option("--min-lr", "LR", "floor of the cosine schedule", "1e-5");
  p.option("--decay-epochs", "N", "step schedule: epochs between decays", "90");
  p.option("--decay-rate", "R", "step schedule: factor per decay", "0.1");
  p.option("--cooldown-epochs", "N", "cosine: epochs at --min-lr after --epochs (the run lasts epochs + N)", "0");
  p.option("--smoothing", "EPS", "label smoothing", "0.1");
  p.option("--mixup", "ALPHA", "Mixup alpha (0: off)", "0");
  p.option("--cutmix", "ALPHA", "CutMix alpha (0: off)", "0");
  p.option("--mixup-prob", "P", "probability of mixing a batch", "1.0");
  p.option("--mixup-switch-prob", "P", "probability of CutMix instead of Mixup when both are on", "0.5");
  p.option("--mixup-mode", "MODE", "batch, pair or elem", "batch");
  p.option("--primary", "KIND", "training crop: rrc (RandomResizedCrop), crop_pad (random crop of a padded image, "
           "for 28x28 / 32x32 data) or none", "rrc");
  p.option("--crop-padding", "PX", "crop_pad: pixels of padding on each side, i.e. the largest shift", "4");
  p.option("--crop-padding-mode", "MODE", "crop_pad: constant (0), reflect or edge", "constant");
  p.option("--scale", "LO,HI", "RandomResizedCrop area range", "0.08,1.0");
  p.option("--hflip", "P", "horizontal flip probability", "0.5");
  p.option("--color-jitter", "S", "color jitter strength (off when --aa is set)", "0.4");
  p.option("--aa", "POLICY", "RandAugment policy, e.g. rand-m9-mstd0.5-inc1 (empty: none)");
  p.option("--train-interpolation", "MODE", "training resize: bilinear, bicubic or random", "bicubic");
  p.option("--reprob", "P", "random erasing probability", "0");
  p.option("--aug-repeats", "N", "repeated augmentation: each image N times per epoch (0: off)", "0");
  p.flag("--model-ema", "keep an exponential moving average of the weights and evaluate it");
  p.option("--model-ema-decay", "D", "EMA decay per update", "0.9998");
  p.option("--pretrained-weights", "FILE", "start from these weights (.safetensors); a classifier of another size is "
           "re-initialized");
  p.option("--seed", "S", "random seed (weights, data order, augmentation, dropout)", "42");
  p.option("--output", "DIR", "run folder: args.yaml, summary.csv, TensorBoard events, checkpoints (empty: "
           "output/train/<time>-<model>)");
  p.option("--resume", "PATH", "continue a run from a checkpoint file or a run folder");
  p.option("--initial-checkpoint", "PATH", "start from these weights (a checkpoint, a run folder's newest, or a "
           ".safetensors of this model); no optimizer or schedule state");
  p.option("--start-epoch", "N", "first epoch to train, overriding a resumed checkpoint's (the schedule starts there)");
  p.option("--log-interval", "N", "steps (evaluation: batches) between progress lines", "50");
  p.option("--val-interval", "N", "evaluate every N epochs and after the last", "1");
  p.flag("--log-wandb", "accepted for timm's scripts: wandb logging is not available, the run goes on without it");
  p.option("--checkpoint-hist", "N", "numbered checkpoints to keep", "10");
  p.option("--threads", "N", "compute threads (0: all cores)", "0");
  p.option("--max-train-batches", "N", "shorter epochs: at most N batches (0: all)", "0");
  p.option("--max-eval-batches", "N", "evaluate on at most N batches (0: all)", "0");
  // Data parallel: launched by mpirun or srun (docs/distributed.md).
  p.option("--dist-backend", "NAME", "collectives between processes: auto (nccl on cuda, mpi on cpu), mpi or nccl",
           "auto");
  p.option("--dist-timeout", "S", "seconds a rank waits on the others before ending the job", "300");
  p.flag("--sync-bn", "batch norm statistics over the processes' whole batch (timm's --sync-bn)");
  add_grad_checkpointing_option(p);
}

// The communicator of a launch (mpirun, srun: several processes), or null for a process alone.
// NCCL asked for by name also runs alone, as a job of one rank (scripts/gpu_check.sh).
std::shared_ptr<train::dist::Communicator> make_communicator(const ArgParser& p) {
  namespace dist = train::dist;
  const dist::LaunchEnv env = dist::launch_env();
  Device device = parse_device(p.get("--device"));
  dist::resolve_backend(p.get("--dist-backend"), device);  // checks the flag even for a process alone
  if (!env.distributed() && p.get("--dist-backend") != "nccl") return nullptr;
  if (!device.is_cpu()) device = Device::cuda(env.local_rank);  // one GPU per process of a machine
  dist::CommunicatorOptions co;
  co.backend = p.get("--dist-backend");
  co.device = device;
  co.timeout_seconds = p.get_double("--dist-timeout");
  TS_CHECK(co.timeout_seconds > 0, "--dist-timeout: expected a positive number of seconds, got ", co.timeout_seconds);
  return dist::create_communicator(env, co);
}

int train_parsed(const ArgParser& p, const std::shared_ptr<train::dist::Communicator>& comm);

// --opt-betas: exactly two numbers.
std::array<double, 2> parse_betas(const std::string& v) {
  std::istringstream in(v);
  std::vector<std::string> words{std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
  std::array<double, 2> betas{};
  TS_CHECK(words.size() == 2 && parse_number(words[0], &betas[0]) && parse_number(words[1], &betas[1]),
           "option --opt-betas: expected two numbers (B1 B2), got '", v, "'");
  return betas;
}

std::array<double, 2> parse_pair(const ArgParser& p, const std::string& flag) {
  const std::string& v = p.get(flag);
  const size_t comma = v.find(',');
  try {
    if (comma != std::string::npos) return {std::stod(v.substr(0, comma)), std::stod(v.substr(comma + 1))};
  } catch (const std::exception&) {
  }
  throw Error(flag + ": expected two comma-separated numbers, got '" + v + "'");
}

// Loads fine-tuning weights: everything must fit except a classifier trained for another number
// of classes, which keeps its fresh initialization (as timm's pretrained loading does).
void load_pretrained(models::Model& model, const std::string& path) {
  nn::NamedTensors weights = model.adapt_state_dict(load_safetensors(path));
  const nn::NamedTensors own = model.state_dict();
  std::erase_if(weights, [&](const auto& entry) {
    if (entry.first.rfind("head.", 0) != 0) return false;
    for (const auto& [name, t] : own)
      if (name == entry.first) return t.shape() != entry.second.shape();
    return false;
  });
  const nn::LoadReport report = model.load_state_dict(weights, /*strict=*/false);
  bool only_head_missing = report.unexpected.empty() && report.mismatched.empty();
  for (const std::string& key : report.missing) only_head_missing &= key.rfind("head.", 0) == 0;
  TS_CHECK(only_head_missing, "--pretrained-weights ", path, " does not fit the model: ", report.str());
  if (!report.missing.empty())
    std::fprintf(stderr, "pretrained weights from %s; the classifier is re-initialized for %lld classes\n", path.c_str(),
                 static_cast<long long>(model.num_classes));
}

}  // namespace

// Every flag of `tessera train` by dest name and type (config_file.h). ArgParser keeps values as
// text; this is what types them in a config and in args.yaml. tests/test_train_config.cpp checks
// that it covers every flag.
const std::vector<ConfigKey>& train_config_keys() {
  using T = ConfigType;
  static const std::vector<ConfigKey> keys = {
      // model flags (model_flags.h)
      {"model", T::String, ""}, {"img_size", T::Int, "0"}, {"num_classes", T::Int, "0"}, {"in_chans", T::Int},
      {"patch_size", T::Int, "0"}, {"drop", T::Float}, {"drop_path", T::Float}, {"layer_scale", T::Float, "-1"},
      {"device", T::String}, {"model_kwargs", T::Kwargs},
      // data flags (data_flags.h)
      {"dataset", T::String}, {"data_dir", T::String}, {"workers", T::Int}, {"interpolation", T::String},
      {"crop_pct", T::Float}, {"mean", T::Numbers}, {"std", T::Numbers}, {"strict_data", T::Switch},
      {"max_image_pixels", T::Int},
      // training flags
      {"train_split", T::String}, {"val_split", T::String}, {"epochs", T::Int}, {"batch_size", T::Int},
      {"grad_accum_steps", T::Int}, {"opt", T::String}, {"opt_eps", T::Float}, {"opt_betas", T::NumberArgs},
      {"layer_decay", T::Float}, {"lr", T::Float}, {"weight_decay", T::Float}, {"momentum", T::Float},
      {"clip_grad", T::Float, "0"}, {"sched", T::String}, {"warmup_epochs", T::Float}, {"warmup_lr", T::Float},
      {"min_lr", T::Float}, {"decay_epochs", T::Float}, {"decay_rate", T::Float}, {"cooldown_epochs", T::Int},
      {"smoothing", T::Float}, {"mixup", T::Float}, {"cutmix", T::Float}, {"mixup_prob", T::Float},
      {"mixup_switch_prob", T::Float}, {"mixup_mode", T::String}, {"primary", T::String}, {"crop_padding", T::Int},
      {"crop_padding_mode", T::String}, {"scale", T::Numbers}, {"hflip", T::Float}, {"color_jitter", T::Float},
      {"aa", T::String, ""}, {"train_interpolation", T::String}, {"reprob", T::Float}, {"aug_repeats", T::Int},
      {"model_ema", T::Switch}, {"model_ema_decay", T::Float}, {"pretrained_weights", T::String},
      {"seed", T::Int}, {"output", T::String}, {"resume", T::String}, {"initial_checkpoint", T::String},
      {"start_epoch", T::Int}, {"log_interval", T::Int}, {"val_interval", T::Int}, {"log_wandb", T::Switch},
      {"checkpoint_hist", T::Int}, {"threads", T::Int}, {"max_train_batches", T::Int},
      {"max_eval_batches", T::Int}, {"dist_backend", T::String}, {"dist_timeout", T::Float}, {"sync_bn", T::Switch},
      {"grad_checkpointing", T::Switch},
      // precision flags (model_flags.h)
      {"amp", T::Amp}, {"amp_dtype", T::String}, {"tf32", T::OnOff},
  };
  return keys;
}

ArgParser train_parser() {
  ArgParser p("train", "Train a model on an image dataset (timm's train.py flags; see docs/training.md).");
  add_model_options(p, "0");
  add_data_options(p);
  add_train_options(p);
  add_precision_options(p);
  return p;
}

bool parse_train_args(ArgParser& p, const Argv& args, std::vector<std::string>* ignored) {
  return p.parse(expand_config(args, train_config_keys(), ignored));
}

int run_train(const Argv& args) {
  ArgParser p = train_parser();
  if (!parse_train_args(p, args)) return 0;
  if (p.is_set("--log-wandb"))
    std::fprintf(stderr, "--log-wandb: wandb logging is not available in tessera; training goes on without it "
                         "(TensorBoard events and summary.csv are in the output folder)\n");
  const std::shared_ptr<train::dist::Communicator> comm = make_communicator(p);
  if (!comm) return train_parsed(p, nullptr);
  try {
    return train_parsed(p, comm);
  } catch (const std::exception& e) {
    // One rank's error ends every rank at once, instead of leaving them waiting on it.
    comm->abort(std::string("tessera train: ") + e.what());
  }
}

train::TrainOptions train_options(const ArgParser& p, int64_t in_chans) {
  train::TrainOptions o;
  o.eval_transform = eval_transform_options(p, in_chans);
  o.train_transform = o.eval_transform;
  o.train_transform.primary = p.get("--primary");
  o.train_transform.crop_padding = p.get_int("--crop-padding");
  o.train_transform.crop_padding_mode = p.get("--crop-padding-mode");
  o.train_transform.scale = parse_pair(p, "--scale");
  o.train_transform.hflip = p.get_double("--hflip");
  o.train_transform.auto_augment = p.get("--aa");
  o.train_transform.color_jitter = p.get("--aa").empty() ? p.get_double("--color-jitter") : 0.0;
  o.train_transform.interpolation = p.get("--train-interpolation");
  o.train_transform.reprob = p.get_double("--reprob");
  o.workers = static_cast<int>(p.get_int("--workers"));
  o.strict_data = p.is_set("--strict-data");
  o.repeats = static_cast<int>(p.get_int("--aug-repeats"));
  o.smoothing = p.get_double("--smoothing");
  o.mixup = p.get_double("--mixup");
  o.cutmix = p.get_double("--cutmix");
  o.mixup_prob = p.get_double("--mixup-prob");
  o.mixup_switch_prob = p.get_double("--mixup-switch-prob");
  o.mixup_mode = p.get("--mixup-mode");
  o.epochs = p.get_int("--epochs");
  o.batch_size = p.get_int("--batch-size");
  o.grad_accum_steps = p.get_int("--grad-accum-steps");
  o.sync_bn = p.is_set("--sync-bn");
  o.opt = p.get("--opt");
  if (!p.get("--opt-eps").empty()) o.opt_eps = p.get_double("--opt-eps");
  if (!p.get("--opt-betas").empty()) o.opt_betas = parse_betas(p.get("--opt-betas"));
  if (!p.get("--layer-decay").empty()) o.layer_decay = p.get_double("--layer-decay");
  o.lr = p.get_double("--lr");
  o.weight_decay = p.get_double("--weight-decay");
  o.momentum = p.get_double("--momentum");
  o.clip_grad = p.get_double("--clip-grad");
  o.sched = p.get("--sched");
  o.warmup_epochs = p.get_double("--warmup-epochs");
  o.warmup_lr = p.get_double("--warmup-lr");
  o.min_lr = p.get_double("--min-lr");
  o.decay_epochs = p.get_double("--decay-epochs");
  o.decay_rate = p.get_double("--decay-rate");
  o.cooldown_epochs = p.get_int("--cooldown-epochs");
  o.model_ema = p.is_set("--model-ema");
  const Precision precision = precision_options(p);
  o.amp = precision.amp;
  o.tf32 = precision.tf32;
  o.model_ema_decay = p.get_double("--model-ema-decay");
  o.seed = static_cast<uint64_t>(p.get_int("--seed"));
  o.resume = p.get("--resume");
  o.initial_checkpoint = p.get("--initial-checkpoint");
  if (!p.get("--start-epoch").empty()) o.start_epoch = p.get_int("--start-epoch");
  o.log_interval = p.get_int("--log-interval");
  o.val_interval = p.get_int("--val-interval");
  o.checkpoint_hist = static_cast<int>(p.get_int("--checkpoint-hist"));
  o.max_train_batches = p.get_int("--max-train-batches");
  o.max_eval_batches = p.get_int("--max-eval-batches");
  o.output = p.get("--output");
  if (o.output.empty()) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    o.output = "output/train/" + std::string(stamp) + "-" + p.get("--model");
  }
  return o;
}

train::Settings train_settings(const ArgParser& p, int64_t in_chans, int64_t num_classes) {
  std::map<std::string, std::string> values;
  for (auto& [dest, value] : p.values()) values[dest] = value;
  values["dataset"] = resolve_dataset(p).name;  // what was trained on, also when --data-dir chose it
  values["in_chans"] = std::to_string(in_chans);
  values["num_classes"] = std::to_string(num_classes);
  // --amp bf16 is timm's amp: true with amp_dtype: bfloat16.
  const Precision precision = precision_options(p);
  if (precision.amp) values["amp_dtype"] = *precision.amp == DType::BFloat16 ? "bfloat16" : "float16";
  train::Settings out;
  for (const ConfigKey& key : train_config_keys()) {
    const auto it = values.find(key.dest);
    TS_CHECK(it != values.end(), "train_settings: the flag --", key.dest, " is not declared");  // a bug here
    out.emplace_back(key.dest, setting_value(key, it->second));
  }
  return out;
}

namespace {

int train_parsed(const ArgParser& p, const std::shared_ptr<train::dist::Communicator>& comm) {
  if (p.get_int("--threads") > 0) {
    set_num_threads(static_cast<int>(p.get_int("--threads")));
  } else if (comm && comm->device().is_cpu()) {
    // Processes on one machine share its cores (as torchrun, which sets OMP_NUM_THREADS=1).
    const int local = train::dist::launch_env().local_size;
    set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local));
  }
  manual_seed(static_cast<uint64_t>(p.get_int("--seed")));

  const bool speaks = !comm || comm->rank() == 0;
  const data::DetectedDataset dataset = resolve_dataset(p);
  if (speaks && !dataset.reason.empty())
    std::fprintf(stderr, "dataset: %s at %s (--dataset not given; %s)\n", dataset.name.c_str(),
                 p.get("--data-dir").c_str(), dataset.reason.c_str());
  const int64_t in_chans = resolve_in_chans(p);
  auto train_set = open_dataset_from_flags(p, p.get("--train-split"), in_chans);
  auto eval_set = open_dataset_from_flags(p, p.get("--val-split"), in_chans);
  models::ModelOptions mo = model_options(p);
  mo.in_chans = in_chans;
  if (comm && !comm->device().is_cpu()) mo.device = comm->device();
  if (mo.num_classes == 0) mo.num_classes = static_cast<int64_t>(train_set->classes().size());
  auto model = models::create_model(p.require("--model"), mo);
  model->grad_checkpointing = p.is_set("--grad-checkpointing");
  if (!p.get("--pretrained-weights").empty()) load_pretrained(*model, p.get("--pretrained-weights"));

  train::TrainOptions o = train_options(p, in_chans);
  o.comm = comm;
  o.settings = train_settings(p, in_chans, mo.num_classes);

  if (speaks)
    std::fprintf(stderr, "%s: %.2f M parameters, %lld classes, %lldx%lld input; %lld training / %lld evaluation images\n",
               p.get("--model").c_str(), model->num_parameters() / 1e6, static_cast<long long>(mo.num_classes),
               static_cast<long long>(model->default_img_size), static_cast<long long>(model->default_img_size),
               static_cast<long long>(train_set->size()), static_cast<long long>(eval_set->size()));
  train::Trainer trainer(model, train_set, eval_set, o);
  const auto rows = trainer.fit();
  if (!rows.empty() && speaks)
    std::printf("final: epoch %lld, eval top1 %.2f%%, top5 %.2f%%, loss %.4f; output in %s\n",
                static_cast<long long>(rows.back().epoch), rows.back().eval_top1, rows.back().eval_top5,
                rows.back().eval_loss, o.output.c_str());
  return 0;
}

}  // namespace

}  // namespace tessera::cli
