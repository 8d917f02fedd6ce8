// Shared model flags; see tools/cli/model_flags.h.
#include "tools/cli/model_flags.h"

#include <algorithm>
#include <sstream>

#include "tessera/io/weights_file.h"
#include "tessera/core/parallel.h"
#include "tessera/models/registry.h"
#include "tessera/io/safetensors.h"
#include "tessera/models/model_file.h"
#include "tessera/train/checkpoint.h"

namespace tessera::cli {

namespace {

using models::ModelOptions;

// "depth=6 embed_dim=128" (spaces or commas between pairs) -> {depth: 6, embed_dim: 128}.
std::map<std::string, double> parse_model_kwargs(const std::string& text) {
  std::map<std::string, double> kwargs;
  std::string pairs = text;
  std::replace(pairs.begin(), pairs.end(), ',', ' ');
  std::istringstream in(pairs);
  for (std::string pair; in >> pair;) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("option --model-kwargs: expected KEY=VALUE, got '" + pair + "'");
    const std::string key = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (!parse_number(value, &kwargs[key]))
      throw UsageError("option --model-kwargs: " + key + " needs a number, got '" + value + "'");
  }
  return kwargs;
}

// timm's model_kwargs as KEY=VALUE arguments (--model-kwargs depth=6 embed_dim=128).
struct KwargsText {
  static constexpr ConfigType type = ConfigType::Kwargs;
  static std::string text(const std::map<std::string, double>& kwargs) {
    std::string out;
    for (const auto& [key, value] : kwargs) out += (out.empty() ? "" : " ") + key + "=" + number_text(value);
    return out;
  }
  static std::map<std::string, double> parse(const std::string&, const std::string&, const std::string& text) {
    return parse_model_kwargs(text);
  }
};

// A device by name; an unknown one is parse_device's error.
struct DeviceText {
  static constexpr ConfigType type = ConfigType::String;
  static std::string text(const Device& device) { return device.str(); }
  static Device parse(const std::string&, const std::string&, const std::string& text) { return parse_device(text); }
};

std::vector<OptionRow<ModelOptions>> make_table() {
  using M = ModelOptions;
  using C = ConfigType;
  return {
      null_when(unbound<M>("--model", "NAME",
                           "model name (see `tessera models`) or a model file (.yaml, docs/models.md); flags not "
                           "given keep the file's values",
                           "create_model: the variant or model file", C::String),
                ""),
      null_when(
          bound<M>("--img-size", "R", "input resolution (0: the variant's)", "ModelOptions::img_size", &M::img_size),
          "0"),
      // Its help says what 0 means where a command's default is 0 (add_model_options).
      null_when(
          bound<M>("--num-classes", "N", "number of classes of the head", "ModelOptions::num_classes", &M::num_classes),
          "0"),
      bound<M>("--in-chans", "C", "input channels", "ModelOptions::in_chans", &M::in_chans),
      null_when(bound<M>("--patch-size", "P",
                         "patch size (XCiT and UFO-ViT also take 4 for 28x28 / 32x32 inputs; 0: the variant's)",
                         "ModelOptions::patch_size", &M::patch_size),
                "0"),
      bound<M>("--drop", "RATE", "dropout rate", "ModelOptions::drop_rate", &M::drop_rate),
      bound<M>("--drop-path", "RATE", "stochastic depth rate", "ModelOptions::drop_path_rate", &M::drop_path_rate),
      null_when(bound<M>("--layer-scale", "VALUE", "LayerScale init (negative: the variant's)",
                         "ModelOptions::layer_scale_init", &M::layer_scale_init),
                "-1"),
      bound<M, DeviceText>("--device", "DEVICE", "where the model runs: cpu, cuda or cuda:N", "ModelOptions::device",
                           &M::device),
      bound<M, KwargsText>("--model-kwargs", "KEY=VALUE",
                           "change the variant's architecture, as timm's (depth=6 embed_dim=128; XCiT, CaiT, UFO-ViT: "
                           "depth, embed_dim, num_heads, mlp_ratio, UFO-ViT also attn_dim; CoaT: num_heads, "
                           "parallel_depth)",
                           "ModelOptions::model_kwargs", &M::model_kwargs),
  };
}

}  // namespace

const std::vector<OptionRow<ModelOptions>>& model_option_table() {
  static const std::vector<OptionRow<ModelOptions>> table = make_table();
  return table;
}

ModelOptions classes_from_weights() {
  ModelOptions defaults;
  defaults.num_classes = 0;
  return defaults;
}

void add_model_options(ArgParser& p, const ModelOptions& defaults) {
  std::vector<OptionRow<ModelOptions>> rows = model_option_table();
  if (defaults.num_classes == 0) row_of(rows, "--num-classes").help += " (0: the weights' head)";
  add_options(p, rows, defaults);
}

std::vector<ConfigKey> model_config_keys() { return config_keys(model_option_table()); }

// 0 (keep the model file's value) for --num-classes and --in-chans not given.
static void keep_file_values(const ArgParser& p, ModelOptions& o) {
  if (!p.given("--num-classes")) o.num_classes = 0;
  if (!p.given("--in-chans")) o.in_chans = 0;
}

ModelOptions model_options(const ArgParser& p) {
  ModelOptions o;
  apply_options(p, model_option_table(), o);
  // A model file's classes and channels when the flags are not given (a name keeps timm's 1000
  // and 3, ModelOptions' defaults, as it always has).
  if (models::is_model_path(p.get("--model"))) keep_file_values(p, o);
  return o;
}

std::string recorded_model_file(const std::string& weights_path) {
  return weights_path.empty() ? std::string() : train::read_model_file_metadata(weights_path);
}

std::shared_ptr<models::Model> create_model_from_flags(const ArgParser& p, const models::ModelOptions& o,
                                                       const std::string& weights_path) {
  if (!p.get("--model").empty()) return models::create_model(p.get("--model"), o);
  const std::string recorded = recorded_model_file(weights_path);
  if (recorded.empty())
    throw UsageError(
        weights_path.empty()
            ? "option --model NAME is required: a model name (see `tessera models`) or a model file (.yaml)"
            : "option --model NAME is required: " + weights_path +
                  " records no model file (older checkpoints and other weights files do not); give "
                  "--model NAME or --model FILE.yaml");
  models::ModelOptions keep = o;
  keep_file_values(p, keep);  // the classes and channels trained, unless the flags say otherwise
  return models::create_model_from_text(recorded, weights_path + " (its recorded model file)", keep);
}

std::string model_label(const ArgParser& p, const std::string& weights_path) {
  if (!p.get("--model").empty()) return p.get("--model");
  const std::string recorded = recorded_model_file(weights_path);
  if (recorded.empty()) return "";
  const std::string name = models::read_model_file(recorded, weights_path).name;
  return name.empty() ? weights_path : name;
}

std::shared_ptr<models::Model> build_model(const ArgParser& p, int64_t* img_size) {
  const models::ModelOptions o = model_options(p);
  auto model = create_model_from_flags(p, o);
  if (img_size) *img_size = o.img_size ? o.img_size : model->default_img_size;
  return model;
}

std::shared_ptr<models::Model> build_model_with_weights(const ArgParser& p, const std::string& weights_path,
                                                        int64_t img_size, const TorchCheckpointOptions& torch) {
  const nn::NamedTensors weights = load_weights_file(weights_path, torch);
  models::ModelOptions o = model_options(p);
  if (img_size > 0) o.img_size = img_size;
  bool channels_found = p.given("--in-chans");
  for (const auto& [name, t] : weights) {
    if (o.num_classes == 0 && name == "head.weight" && t.dim() == 2) o.num_classes = t.size(0);
    // The first convolution of the patch embedding sees the image: its input channels.
    if (!channels_found && name.rfind("patch_embed", 0) == 0 && t.dim() == 4) {
      o.in_chans = t.size(1);
      channels_found = true;
    }
  }
  // num_classes still 0: the model file's (timm's 1000 for a named variant).
  auto model = create_model_from_flags(p, o, weights_path);
  // Not strict, so that the missing, unexpected and mismatched keys come back as a report to
  // phrase with the file's name; what the model's adaptation refuses is passed on with it.
  const std::string does_not_fit =
      "the weights in " + weights_path + " do not fit " + model_label(p, weights_path) + ":";
  nn::LoadReport report;
  try {
    report = model->load_weights(weights, /*strict=*/false);
  } catch (const Error& e) { throw Error(does_not_fit + " " + e.what()); }
  if (!report.ok()) throw Error(does_not_fit + report.str());
  model->eval();
  return model;
}

void add_threads_option(ArgParser& p) {
  add_options<ModelOptions>(p, {threads_row<ModelOptions>("apply_threads_option")});
}

void apply_threads_option(const ArgParser& p) {
  const int64_t n = p.get_int("--threads");
  if (n < 0) throw UsageError("option --threads: expected 0 (all cores) or a positive count, got " + std::to_string(n));
  if (n > 0) set_num_threads(static_cast<int>(n));
}

}  // namespace tessera::cli
