// `tessera predict`: a model's predictions for a batch given either as a float32 (or float64,
// converted) NCHW .npy array (already resized and normalized as the model expects; logits are
// written as a float32 .npy
// [B, classes]) or as image files (decoded and passed through the evaluation transform; the top-k
// classes are printed with their names, and the logits written too when --output is given).
// The model is built at the input's resolution; a learned position table trained at another
// resolution is resampled when the weights load (Model::load_weights).
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "tessera/io/npy.h"
#include "tessera/ops/ops.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/data_flags.h"
#include "tools/cli/image_input.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/precision_flags.h"

namespace tessera::cli {

namespace {

// What a .npy input must be, for every message about one that is not.
std::string npy_contract(int64_t in_chans) {
  return detail::concat("float32 or float64 images [B, ", in_chans, ", R, R] (batch, channels first, square), ",
                        "already resized and normalized as the model expects");
}

// The array as float32 images; float64 (NumPy's default) is converted.
Tensor read_npy_images(const std::string& path) {
  Tensor images = io::read_npy(path);
  if (images.dtype() == DType::Float64) return images.to(DType::Float32);
  TS_CHECK(images.dtype() == DType::Float32, "predict: ", path, " holds ", dtype_name(images.dtype()),
           " data; --input takes ", npy_contract(images.dim() == 4 ? images.size(1) : 3),
           " (convert with x.astype(np.float32))");
  return images;
}

void check_npy_images(const Tensor& images, const std::string& path, int64_t in_chans, int64_t img_size) {
  TS_CHECK(images.dim() == 4 && images.size(1) == in_chans && images.size(2) == images.size(3) && images.size(0) > 0,
           "predict: ", path, " has shape ", images.shape(), ", expected [B, ", in_chans, ", R, R]: --input takes ",
           npy_contract(in_chans));
  TS_CHECK(img_size == 0 || img_size == images.size(2), "predict: --img-size ", img_size, " but ", path, " holds ",
           images.size(2), "x", images.size(3), " images");
}

void print_top_k(const Tensor& logits, const std::vector<std::string>& inputs, const std::vector<std::string>& names,
                 int64_t k) {
  const Tensor probs = softmax(logits, -1).to(Device::cpu()).contiguous();
  const int64_t n = probs.size(1);
  k = std::min(k, n);
  for (int64_t i = 0; i < probs.size(0); ++i) {
    const float* p = probs.data<float>() + i * n;
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::printf("%s\n", inputs[i].c_str());
    for (int64_t j = 0; j < k; ++j) std::printf("  %6.2f%%  %s\n", 100.0 * p[order[j]], names[order[j]].c_str());
  }
}

}  // namespace

int run_predict(const Argv& args) {
  ArgParser p("predict", "Run a model in eval mode on a .npy batch or on image files.");
  add_model_options(p, classes_from_weights());
  add_data_options(p);
  p.option("--weights", "FILE",
           "weights (.safetensors with timm's parameter names, or a PyTorch .pth/.bin checkpoint)");
  p.option("--input", "X.npy|IMG,...",
           "float32/float64 [B, C, R, R] .npy (normalized as for training), or comma-separated image files");
  p.option("--output", "Y.npy", "write the logits, float32 [B, num_classes] (required for .npy input)");
  p.option("--topk", "K", "image input: print the K most likely classes", "5");
  p.option("--class-names", "FILE", "image input: class names, one per line (none: --dataset's, else numbers)");
  add_precision_options(p);
  add_threads_option(p);
  if (!p.parse(args)) return 0;
  apply_threads_option(p);
  const Precision precision = precision_options(p);
  apply_precision(precision);
  const std::string& weights_path = p.require("--weights");
  const std::string& input = p.require("--input");
  const bool npy = is_npy(input);
  if (npy && p.get("--output").empty()) throw UsageError("option --output Y.npy is required for .npy input");

  Tensor images;
  std::shared_ptr<models::Model> model;
  if (npy) {
    // The array fixes the resolution; the weights fix the channels (checked against the array).
    images = read_npy_images(input);
    model = build_model_with_weights(p, weights_path, images.dim() == 4 ? images.size(2) : 0);
    check_npy_images(images, input, model->in_chans, p.get_int("--img-size"));
  } else {
    if (split_list(input).empty())
      throw UsageError("option --input: expected a .npy file or comma-separated image files, got '" + input + "'");
    model = build_model_with_weights(p, weights_path);
    data::TransformOptions t = eval_transform_options(p, model->in_chans);
    t.img_size = model->default_img_size;
    images = load_image_batch(split_list(input), t);
  }
  NoGradGuard no_grad;
  Tensor logits;
  {
    const auto autocast = autocast_scope(precision, model->device());
    logits = model->forward(images.to(model->device()));
  }
  logits = logits.to(Device::cpu()).to(DType::Float32).contiguous();  // bfloat16 under --amp: float32 out
  if (!p.get("--output").empty()) io::write_npy(p.get("--output"), logits);
  if (npy) {
    std::fprintf(stderr, "predict: %lld images -> %s [%lld, %lld]\n", static_cast<long long>(images.size(0)),
                 p.get("--output").c_str(), static_cast<long long>(logits.size(0)),
                 static_cast<long long>(logits.size(1)));
  } else {
    print_top_k(logits, split_list(input), class_names(p, logits.size(1), model->in_chans), p.get_int("--topk"));
  }
  return 0;
}

}  // namespace tessera::cli
