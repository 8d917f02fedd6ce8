#include "linear_vit.h"

#include <tessera/core/error.h>
#include <tessera/nn/init.h>
#include <tessera/ops/ops.h>

namespace custom {

using tessera::Tensor;
namespace nn = tessera::nn;

namespace {
constexpr double kLayerNormEps = 1e-6;
constexpr double kClassAttentionInit = 1e-5;  // CaiT's LayerScale init for shallow models
}  // namespace

LinearAttentionBlock::LinearAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio, double drop) {
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, kLayerNormEps));
  attn = register_module("attn", std::make_shared<LinearAttention>(dim, heads));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, kLayerNormEps));
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(dim * mlp_ratio), drop));
  nn::init_trunc_normal(*attn->qkv);
  nn::init_trunc_normal(*attn->proj);
  nn::init_trunc_normal(*mlp);
}

Tensor LinearAttentionBlock::forward(const Tensor& x) {
  nn::ForwardScope scope(*this);
  Tensor y = x + attn->forward(norm1->forward(x));
  return scope.output(y + mlp->forward(norm2->forward(y)));
}

LinearVit::LinearVit(const LinearVitConfig& c) : config(c) {
  TS_CHECK(c.img_size % c.patch_size == 0, "LinearVit: image size ", c.img_size, " is not a multiple of patch size ",
           c.patch_size);
  const int64_t d = c.embed_dim, grid = c.img_size / c.patch_size;
  num_classes = c.num_classes;
  default_img_size = c.img_size;
  in_chans = c.in_chans;
  cls_token = register_parameter("cls_token", tessera::zeros({1, 1, d}));
  pos_embed = register_parameter("pos_embed", tessera::zeros({1, grid * grid, d}));
  nn::init::trunc_normal_(cls_token, 0.02);
  nn::init::trunc_normal_(pos_embed, 0.02);
  patch_embed = register_module("patch_embed", std::make_shared<nn::PatchEmbed>(c.patch_size, c.in_chans, d));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList<LinearAttentionBlock>>());
  for (int64_t i = 0; i < c.depth; ++i)
    blocks->push_back(std::make_shared<LinearAttentionBlock>(d, c.num_heads, c.mlp_ratio, c.drop_rate));
  blocks_token_only = register_module(
      "blocks_token_only", std::make_shared<nn::ModuleList<tessera::models::LayerScaleClassAttentionBlock>>());
  for (int i = 0; i < 2; ++i)
    blocks_token_only->push_back(std::make_shared<tessera::models::LayerScaleClassAttentionBlock>(
        d, c.num_heads, c.mlp_ratio, kClassAttentionInit, 0.0));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(d, kLayerNormEps));
  head = register_module("head", std::make_shared<nn::Linear>(d, c.num_classes));
  nn::init_trunc_normal(*head);
}

Tensor LinearVit::forward(const Tensor& images) {
  TS_CHECK(images.dim() == 4 && images.size(1) == config.in_chans && images.size(2) == config.img_size &&
               images.size(3) == config.img_size,
           "LinearVit: expected images [B, ", config.in_chans, ", ", config.img_size, ", ", config.img_size, "], got ",
           images.shape());
  nn::ForwardScope scope(*this);
  int64_t H = 0, W = 0;
  Tensor x = patch_embed->forward(images, &H, &W) + pos_embed;
  for (const auto& block : *blocks) x = block->forward(x);
  Tensor cls = cls_token.expand({x.size(0), 1, config.embed_dim});
  for (const auto& block : *blocks_token_only) cls = block->forward(x, cls);
  Tensor out = norm->forward(tessera::cat({cls, x}, 1)).select(1, 0);
  return scope.output(head->forward(tessera::dropout(out, config.drop_rate, is_training())));
}

void register_linear_vit() {
  tessera::models::register_model("linear_vit_tiny", [](const tessera::models::ModelOptions& o) {
    LinearVitConfig c;
    if (o.img_size > 0) c.img_size = o.img_size;
    if (o.patch_size > 0) c.patch_size = o.patch_size;
    c.in_chans = o.in_chans;
    c.num_classes = o.num_classes;
    c.drop_rate = o.drop_rate;
    for (const auto& [key, value] : o.model_kwargs) {
      if (key == "depth") c.depth = static_cast<int64_t>(value);
      else if (key == "embed_dim") c.embed_dim = static_cast<int64_t>(value);
      else if (key == "num_heads") c.num_heads = static_cast<int64_t>(value);
      else if (key == "mlp_ratio") c.mlp_ratio = value;
      else
        throw tessera::Error("linear_vit_tiny: unknown model kwarg '" + key +
                             "'; it takes depth, embed_dim, num_heads, mlp_ratio");
    }
    TS_CHECK(c.depth >= 1 && c.embed_dim >= 1 && c.num_heads >= 1 && c.mlp_ratio > 0,
             "linear_vit_tiny: depth, embed_dim, num_heads and mlp_ratio must be positive");
    return std::make_shared<LinearVit>(c);
  });
}

}  // namespace custom
