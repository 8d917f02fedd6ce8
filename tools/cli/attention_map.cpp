// `tessera attention-map`: the class token's attention over the image patches in the last
// class-attention layer, one PNG heat-map per head laid over the input image at its own size with
// a colorbar (tools/cli/attention_picture.h), plus their mean and the model's view of the image.
// Works for the models with softmax class attention (XCiT, CaiT).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "tessera/data/decode.h"
#include "tessera/data/encode.h"
#include "tessera/nn/class_attention.h"
#include "tessera/nn/probe.h"
#include "tessera/ops/ops.h"
#include "tools/cli/args.h"
#include "tools/cli/attention_picture.h"
#include "tools/cli/commands.h"
#include "tools/cli/data_flags.h"
#include "tools/cli/image_input.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/precision_flags.h"

namespace tessera::cli {

namespace {

// Every ClassAttention in the module tree, in forward order.
void collect_class_attention(nn::Module& m, std::vector<std::shared_ptr<nn::ClassAttention>>& out) {
  for (const auto& [name, child] : m.named_children()) {
    if (auto ca = std::dynamic_pointer_cast<nn::ClassAttention>(child)) out.push_back(ca);
    collect_class_attention(*child, out);
  }
}

// The model's input as a picture: the normalized tensor [C, R, R] mapped back to 0..255.
data::Image to_picture(const Tensor& image, const std::vector<double>& mean, const std::vector<double>& std) {
  const Tensor x = image.contiguous();
  const int64_t C = x.size(0), H = x.size(1), W = x.size(2);
  data::Image out(H, W, C);
  const float* p = x.data<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < H * W; ++i)
      out.pixels[i * C + c] =
          static_cast<uint8_t>(std::clamp((p[c * H * W + i] * std[c] + mean[c]) * 255.0, 0.0, 255.0));
  return out;
}

}  // namespace

int run_attention_map(const Argv& args) {
  ArgParser p("attention-map", "Write the class-attention maps of each head over an image as PNG files.");
  add_model_options(p, classes_from_weights());
  add_data_options(p);
  p.option("--weights", "FILE", "weights (.safetensors, or a PyTorch .pth/.bin checkpoint)");
  p.option("--image", "FILE", "the input image (JPEG, PNG, BMP, ...)");
  p.option("--output", "DIR", "folder for head<k>.png, mean.png and input.png (the model's crop)", "attention-maps");
  add_precision_options(p);
  add_threads_option(p);
  if (!p.parse(args)) return 0;
  apply_threads_option(p);
  const Precision precision = precision_options(p);
  apply_precision(precision);
  const std::string& weights = p.require("--weights");
  auto model = build_model_with_weights(p, weights);
  std::vector<std::shared_ptr<nn::ClassAttention>> layers;
  collect_class_attention(*model, layers);
  TS_CHECK(!layers.empty(), "attention-map: ", model_label(p, weights),
           " has no softmax class attention (XCiT and CaiT models have it)");

  data::TransformOptions t = eval_transform_options(p, model->in_chans);
  t.img_size = model->default_img_size;
  const std::string& image_path = p.require("--image");
  const Tensor batch = load_image_batch({image_path}, t);
  nn::ProbeRecorder probes;
  {
    NoGradGuard no_grad;
    const auto autocast = autocast_scope(precision, model->device());
    nn::ObserveForward observe(probes);  // probes are kept as float32 (nn/probe.h)
    model->forward(batch.to(model->device()));
  }
  const Tensor attn = probes.value(*layers.back(), "attention");  // [1, heads, 1, 1 + N]
  const int64_t heads = attn.size(1), n = attn.size(3) - 1;
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  TS_CHECK(grid * grid == n, "attention-map: ", n, " patch tokens do not form a square grid");
  const Tensor maps = attn.select(0, 0).select(1, 0).narrow(1, 1, n).reshape({heads, grid, grid});  // drop CLS

  const std::string dir = p.get("--output");
  std::filesystem::create_directories(dir);
  data::write_png(dir + "/input.png", to_picture(batch.select(0, 0), t.mean, t.std));
  const data::Image image = data::decode_image(image_path, model->in_chans);
  const data::Box crop = eval_crop_in_image(image.height, image.width, t.img_size, t.crop_pct);
  for (int64_t h = 0; h < heads; ++h)
    data::write_png(dir + "/head" + std::to_string(h) + ".png", attention_picture(maps.select(0, h), image, crop));
  data::write_png(dir + "/mean.png", attention_picture(mean(maps, {0}), image, crop));
  std::printf(
      "attention-map: %lld heads over a %lldx%lld patch grid -> %s/head0..%lld.png, mean.png (%lldx%lld, "
      "colorbar from each map's lowest attention, bottom, to its highest, top)\n",
      static_cast<long long>(heads), static_cast<long long>(grid), static_cast<long long>(grid), dir.c_str(),
      static_cast<long long>(heads - 1), static_cast<long long>(image.width), static_cast<long long>(image.height));
  return 0;
}

}  // namespace tessera::cli
