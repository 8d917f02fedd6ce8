// `tessera predict`: logits of a model for a batch of images given as a float32 NCHW .npy array
// (already resized and normalized, as the model expects), written as a float32 .npy [B, classes].
// The model is built at the input's resolution; a learned position table trained at another
// resolution is resampled when the weights load (Model::load_weights).
#include <cstdio>

#include "data/npy.h"
#include "models/registry.h"
#include "nn/safetensors.h"
#include "ops/ops.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_flags.h"

namespace tessera::cli {

int run_predict(const Argv& args) {
  ArgParser p("predict", "Run a model in eval mode on a float32 [B, C, H, W] .npy batch and write the logits.");
  add_model_options(p, "0");
  p.option("--weights", "FILE", "weights (.safetensors, timm's parameter names)");
  p.option("--input", "X.npy", "images, float32 [B, C, H, W] with H = W, normalized as for training");
  p.option("--output", "Y.npy", "where to write the logits, float32 [B, num_classes]");
  if (!p.parse(args)) return 0;
  const std::string& weights_path = p.require("--weights");
  const std::string& input_path = p.require("--input");
  const std::string& output_path = p.require("--output");

  const Tensor images = data::read_npy(input_path);
  const int64_t in_chans = p.get_int("--in-chans");
  TS_CHECK(images.dtype() == DType::Float32, "predict: ", input_path, " holds ", dtype_name(images.dtype()),
           " data, expected float32 images");
  TS_CHECK(images.dim() == 4 && images.size(1) == in_chans && images.size(2) == images.size(3) && images.size(0) > 0,
           "predict: ", input_path, " has shape ", images.shape(), ", expected [B, ", in_chans,
           ", R, R] (square images, channels first)");
  const int64_t img_size = p.get_int("--img-size");
  TS_CHECK(img_size == 0 || img_size == images.size(2), "predict: --img-size ", img_size, " but ", input_path,
           " holds ", images.size(2), "x", images.size(3), " images");

  // The head's size comes from the weights unless --num-classes says otherwise.
  const nn::NamedTensors weights = load_safetensors(weights_path);
  models::ModelOptions options = model_options(p);
  options.img_size = images.size(2);
  if (options.num_classes == 0) {
    options.num_classes = 1000;
    for (const auto& [name, t] : weights)
      if (name == "head.weight" && t.dim() == 2) options.num_classes = t.size(0);
  }
  auto model = models::create_model(p.require("--model"), options);
  try {
    model->load_weights(weights);
  } catch (const Error& e) {
    throw Error(std::string("predict: the weights in ") + weights_path + " do not fit " + p.get("--model") + ": " +
                e.what());
  }
  model->eval();
  NoGradGuard no_grad;
  const Tensor logits = model->forward(images);
  data::write_npy(output_path, logits.contiguous());
  std::fprintf(stderr, "predict: %lld images -> %s [%lld, %lld]\n", static_cast<long long>(images.size(0)),
               output_path.c_str(), static_cast<long long>(logits.size(0)), static_cast<long long>(logits.size(1)));
  return 0;
}

}  // namespace tessera::cli
