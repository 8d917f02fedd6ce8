// `tessera train`: trains a registered model on a dataset, from scratch or from pretrained
// weights, with timm's flag names (train.py) and output folder. See train/trainer.h.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <thread>

#include "tessera/io/weights_file.h"
#include "tessera/core/parallel.h"
#include "tessera/models/model_file.h"
#include "tessera/models/registry.h"
#include "tessera/train/checkpoint.h"
#include "tessera/io/safetensors.h"
#include "tessera/ops/ops.h"
#include "tools/cli/data_flags.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/precision_flags.h"
#include "tools/cli/train.h"
#include "tools/cli/train_options.h"
#include "tessera/train/distributed/communicator.h"

namespace tessera::cli {

namespace {

// `tessera train`'s own flags after the -c/--config that names a file of any of them.
void add_config_option(ArgParser& p) {
  p.option("--config", "FILE",
           "YAML file of flag values, e.g. a run's args.yaml (timm's or Tessera's): its values "
           "become the defaults, flags given here override them",
           "", "-c");
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

// Loads fine-tuning weights: everything must fit except a classifier trained for another number
// of classes, which keeps its fresh initialization (as timm's pretrained loading does).
void load_pretrained(models::Model& model, const std::string& path) {
  nn::NamedTensors weights = model.to_own_names(load_weights_file(path));
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
    std::fprintf(stderr, "pretrained weights from %s; the classifier is re-initialized for %lld classes\n",
                 path.c_str(), static_cast<long long>(model.num_classes));
}

}  // namespace

// Every flag of `tessera train` by dest name and type, in --help order, from the option tables.
// tests/test_train_config.cpp checks that they cover every flag.
const std::vector<ConfigKey>& train_config_keys() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> out;
    for (std::vector<ConfigKey> group :
         {model_config_keys(), data_config_keys(), config_keys(train_option_table()), precision_config_keys()})
      out.insert(out.end(), group.begin(), group.end());
    return out;
  }();
  return keys;
}

std::string train_flags_markdown() {
  // Where each flag's value goes, as its row says.
  std::map<std::string, std::string> consumer;
  const auto add = [&](const auto& rows) {
    for (const auto& row : rows) consumer[row.config_key().dest] = row.consumer;
  };
  add(model_option_table());
  add(data_option_table<train::TrainOptions>());
  add(train_option_table());
  add(precision_option_table<train::TrainOptions>());
  consumer["config"] = "read before the other flags (config_file.h)";
  return flags_markdown(train_parser(), train_config_keys(), [&](const std::string& dest) { return consumer[dest]; });
}

ArgParser train_parser() {
  ArgParser p("train", "Train a model on an image dataset (timm's train.py flags; see docs/training.md).");
  add_model_options(p, classes_from_weights());  // 0: the dataset's classes
  add_data_options(p);
  add_config_option(p);
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
    std::fprintf(stderr,
                 "--log-wandb: wandb logging is not available in tessera; training goes on without it "
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

train::TrainOptions train_options(const ArgParser& p, int64_t in_chans, const std::string& model_label) {
  train::TrainOptions o;
  // The transforms share the data flags (mean, std, interpolation, crop_pct) with `tessera
  // validate`; the training transform takes them too, then its own rows override the rest.
  o.eval_transform.in_chans = in_chans;
  apply_data_options(p, o);
  o.train_transform = o.eval_transform;
  apply_options(p, precision_option_table<train::TrainOptions>(), o);
  apply_train_options(p, o);
  if (o.output.empty()) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    o.output = "output/train/" + std::string(stamp) + "-" + (model_label.empty() ? p.get("--model") : model_label);
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

// What `tessera train` builds: --model (a name or a model file) or, without it, the model file
// recorded in the checkpoint it starts from (train/checkpoint.h).
struct TrainModel {
  std::string name;                       // --model, for create_model (empty: `text`)
  std::string text, source;               // the recorded model file and where it came from
  std::optional<models::ModelSpec> spec;  // a model file's values (none for a named variant)
  std::string label;                      // for messages and the default output folder
};

// The weights a run without --model takes its model file from: --resume's, else
// --initial-checkpoint's, else --pretrained-weights' (the flag and the path; none: empty).
std::pair<std::string, std::string> starting_weights(const ArgParser& p) {
  for (const char* flag : {"--resume", "--initial-checkpoint", "--pretrained-weights"})
    if (!p.get(flag).empty()) return {flag, p.get(flag)};
  return {};
}

TrainModel train_model(const ArgParser& p) {
  TrainModel m;
  m.name = m.label = p.get("--model");
  if (m.name.empty()) {
    const auto [flag, given] = starting_weights(p);
    std::string checkpoint = given;
    if (!checkpoint.empty() && std::filesystem::is_directory(checkpoint))
      checkpoint = train::find_resume(checkpoint).value_or("");
    m.text = recorded_model_file(checkpoint);
    if (m.text.empty())
      throw UsageError(
          flag.empty() ? "option --model NAME is required: a model name (see `tessera models`) or a model file (.yaml)"
                       : "option --model NAME is required: " + flag + " " + given +
                             " records no model file (older checkpoints and other weights files do not); give "
                             "--model NAME or FILE.yaml");
    m.source = checkpoint + " (its recorded model file)";
    m.spec = models::read_model_file(m.text, m.source);
    m.label = m.spec->name.empty() ? "model" : m.spec->name;
  } else if (!models::is_shipped_model(m.name) && models::is_model_path(m.name)) {
    m.spec = models::load_model_file(m.name);
    m.source = m.name;
    m.label = std::filesystem::path(m.name).stem().string();
  }
  return m;
}

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
  const TrainModel file = train_model(p);
  // A model file's channels unless --in-chans is given; a named variant's follow the dataset.
  const int64_t in_chans = file.spec && !p.given("--in-chans") ? file.spec->in_chans : resolve_in_chans(p);
  auto train_set = open_dataset_from_flags(p, p.get("--train-split"), in_chans);
  auto eval_set = open_dataset_from_flags(p, p.get("--val-split"), in_chans);
  models::ModelOptions mo = model_options(p);
  mo.in_chans = in_chans;
  if (comm && !comm->device().is_cpu()) mo.device = comm->device();
  const int64_t dataset_classes = static_cast<int64_t>(train_set->classes().size());
  if (mo.num_classes == 0) mo.num_classes = dataset_classes;
  if (speaks && file.spec && !p.given("--num-classes") && file.spec->num_classes != dataset_classes)
    std::fprintf(stderr, "%s: num_classes %lld -> %lld, the dataset's (--num-classes sets it)\n", file.source.c_str(),
                 static_cast<long long>(file.spec->num_classes), static_cast<long long>(dataset_classes));
  auto model = file.text.empty() ? models::create_model(file.name, mo)
                                 : models::create_model_from_text(file.text, file.source, mo);
  model->grad_checkpointing = p.is_set("--grad-checkpointing");
  if (!p.get("--pretrained-weights").empty()) load_pretrained(*model, p.get("--pretrained-weights"));

  train::TrainOptions o = train_options(p, in_chans, file.label);
  o.comm = comm;
  o.settings = train_settings(p, in_chans, mo.num_classes);
  // A model rebuilt from a checkpoint is recorded as the run folder's model.yaml, which the trainer
  // writes, so that args.yaml names a model that builds again (`--model` from it, as `tessera
  // explain --checkpoint` and `train -c args.yaml` read it).
  if (!file.text.empty())
    for (auto& [key, value] : o.settings)
      if (key == "model") value = (std::filesystem::path(o.output) / train::kModelFileName).string();

  if (speaks)
    std::fprintf(stderr,
                 "%s: %.2f M parameters, %lld classes, %lldx%lld input; %lld training / %lld evaluation images\n",
                 file.label.c_str(), model->num_parameters() / 1e6, static_cast<long long>(mo.num_classes),
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
