// Shared model flags; see tools/cli/model_flags.h.
#include "tools/cli/model_flags.h"

#include <algorithm>
#include <sstream>

#include "tessera/io/weights_file.h"
#include "tessera/core/autocast.h"
#include "tessera/core/parallel.h"
#include "tessera/models/registry.h"
#include "tessera/io/safetensors.h"

namespace tessera::cli {

void add_model_options(ArgParser& p, const std::string& default_num_classes) {
  p.option("--model", "NAME", "model name, as timm's (see `tessera models`)");
  p.option("--img-size", "R", "input resolution (0: the variant's)", "0");
  p.option("--num-classes", "N",
           default_num_classes == "0" ? "number of classes of the head (0: the weights' head)"
                                      : "number of classes of the head",
           default_num_classes);
  p.option("--in-chans", "C", "input channels", "3");
  p.option("--patch-size", "P", "patch size (XCiT and UFO-ViT also take 4 for 28x28 / 32x32 inputs; 0: the variant's)",
           "0");
  p.option("--drop", "RATE", "dropout rate", "0");
  p.option("--drop-path", "RATE", "stochastic depth rate", "0");
  p.option("--layer-scale", "VALUE", "LayerScale init (negative: the variant's)", "-1");
  p.option("--device", "DEVICE", "where the model runs: cpu, cuda or cuda:N", "cpu");
  p.list_option("--model-kwargs", "KEY=VALUE",
                "change the variant's architecture, as timm's (depth=6 embed_dim=128; XCiT, CaiT, UFO-ViT: depth, "
                "embed_dim, num_heads, mlp_ratio, UFO-ViT also attn_dim; CoaT: num_heads, parallel_depth)");
}

std::vector<ConfigKey> model_config_keys() {
  using T = ConfigType;
  return {{"model", T::String, ""},   {"img_size", T::Int, "0"},       {"num_classes", T::Int, "0"},
          {"in_chans", T::Int},       {"patch_size", T::Int, "0"},     {"drop", T::Float},
          {"drop_path", T::Float},    {"layer_scale", T::Float, "-1"}, {"device", T::String},
          {"model_kwargs", T::Kwargs}};
}

namespace {

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

}  // namespace

models::ModelOptions model_options(const ArgParser& p) {
  models::ModelOptions o;
  o.num_classes = p.get_int("--num-classes");
  o.img_size = p.get_int("--img-size");
  o.in_chans = p.get_int("--in-chans");
  o.patch_size = p.get_int("--patch-size");
  o.drop_rate = p.get_double("--drop");
  o.drop_path_rate = p.get_double("--drop-path");
  o.layer_scale_init = p.get_double("--layer-scale");
  o.model_kwargs = parse_model_kwargs(p.get("--model-kwargs"));
  o.device = parse_device(p.get("--device"));
  return o;
}

std::shared_ptr<models::Model> build_model(const ArgParser& p, int64_t* img_size) {
  const models::ModelOptions o = model_options(p);
  auto model = models::create_model(p.require("--model"), o);
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
  if (o.num_classes == 0) o.num_classes = 1000;
  auto model = models::create_model(p.require("--model"), o);
  // Not strict, so that the missing, unexpected and mismatched keys come back as a report to
  // phrase with the file's name; what the model's adaptation refuses is passed on with it.
  const std::string does_not_fit = "the weights in " + weights_path + " do not fit " + p.get("--model") + ":";
  nn::LoadReport report;
  try {
    report = model->load_weights(weights, /*strict=*/false);
  } catch (const Error& e) { throw Error(does_not_fit + " " + e.what()); }
  if (!report.ok()) throw Error(does_not_fit + report.str());
  model->eval();
  return model;
}

}  // namespace tessera::cli

namespace tessera::cli {

void add_precision_options(ArgParser& p) {
  p.optional_value_option("--amp", "DTYPE",
                          "mixed precision on cuda: bf16 or fp16 (alone: --amp-dtype's, as timm), off", "off", "on");
  p.option("--amp-dtype", "DTYPE", "the dtype of a bare --amp: float16 or bfloat16 (timm's flag)", "float16");
  p.option("--amp-activations", "low|float32",
           "under --amp, the activations between ops: low (the --amp dtype; half the bytes) or float32 (only the "
           "GEMMs and convolutions compute in the --amp dtype, as PyTorch's autocast)",
           "low");
  p.option("--tf32", "on|off", "let float32 matmuls and convolutions on cuda use TF32 tensor cores", "off");
  p.flag("--deterministic",
         "on cuda, only library algorithms whose results do not vary run to run (cuDNN's convolution gradients)");
}

std::vector<ConfigKey> precision_config_keys() {
  return {{"amp", ConfigType::Amp},
          {"amp_dtype", ConfigType::String},
          {"amp_activations", ConfigType::String},
          {"tf32", ConfigType::OnOff},
          {"deterministic", ConfigType::Switch}};
}

namespace {
std::optional<DType> half_dtype(const std::string& name, const char* flag) {
  if (name == "bf16" || name == "bfloat16") return DType::BFloat16;
  if (name == "fp16" || name == "float16") return DType::Float16;
  throw UsageError(
      detail::concat("option ", flag, ": expected bf16 (bfloat16), fp16 (float16) or off, got '", name, "'"));
}
}  // namespace

Precision precision_options(const ArgParser& p) {
  Precision r;
  const std::string& amp = p.get("--amp");
  if (amp == "on") r.amp = half_dtype(p.get("--amp-dtype"), "--amp-dtype");
  else if (amp != "off") r.amp = half_dtype(amp, "--amp");
  const std::string& activations = p.get("--amp-activations");
  if (activations != "low" && activations != "float32")
    throw UsageError("option --amp-activations: expected low or float32, got '" + activations + "'");
  r.activations = activations == "low" ? AmpActivations::Low : AmpActivations::Float32;
  const std::string& tf32 = p.get("--tf32");
  if (tf32 != "on" && tf32 != "off") throw UsageError("option --tf32: expected on or off, got '" + tf32 + "'");
  r.tf32 = tf32 == "on";
  r.deterministic = p.is_set("--deterministic");
  return r;
}

void apply_precision(const Precision& precision) {
  set_allow_tf32(precision.tf32);
  set_amp_activations(precision.activations);
  set_deterministic_algorithms(precision.deterministic);
}

void add_grad_checkpointing_option(ArgParser& p) {
  p.flag("--grad-checkpointing",
         "keep only each block's input for the backward pass and recompute the rest there: "
         "much less memory, about a third more compute");
}

ConfigKey grad_checkpointing_config_key() { return {"grad_checkpointing", ConfigType::Switch}; }

void add_cuda_graph_option(ArgParser& p) {
  p.flag("--cuda-graph",
         "on cuda, record the training step once as a CUDA Graph and replay it: one launch per step "
         "(falls back to eager steps, saying why, where the step cannot be captured)");
}

ConfigKey cuda_graph_config_key() { return {"cuda_graph", ConfigType::Switch}; }

void add_threads_option(ArgParser& p) { p.option("--threads", "N", "compute threads (0: all cores)", "0"); }

void apply_threads_option(const ArgParser& p) {
  const int64_t n = p.get_int("--threads");
  if (n < 0) throw UsageError("option --threads: expected 0 (all cores) or a positive count, got " + std::to_string(n));
  if (n > 0) set_num_threads(static_cast<int>(n));
}

}  // namespace tessera::cli
