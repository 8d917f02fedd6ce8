#include "tessera/models/ufo_vit.h"

#include "tessera/models/pos_embed.h"

#include "tessera/nn/init.h"
#include "tessera/nn/lpi.h"
#include "tessera/ops/ops.h"

namespace tessera::models {

namespace {
constexpr double kUfoLayerNormEps = 1e-6;
}

UFOBlock::UFOBlock(int64_t dim, int64_t attn_dim, int64_t heads, double mlp_ratio, double init_values, double drop,
                   double drop_path)
    : drop_path_(drop_path) {
  gamma1 = register_parameter("gamma1", full({dim}, init_values));
  gamma3 = register_parameter("gamma3", full({dim}, init_values));
  gamma2 = register_parameter("gamma2", full({dim}, init_values));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, kUfoLayerNormEps));
  attn = register_module("attn", std::make_shared<nn::UFOAttention>(dim, attn_dim, heads, true, drop));
  norm3 = register_module("norm3", std::make_shared<nn::LayerNorm>(dim, kUfoLayerNormEps));
  // Depthwise 3x3 with bias, PyTorch's default init (as XCiT's LPI convs).
  local_conv = register_module(
      "local_conv", std::make_shared<nn::Conv2d>(dim, dim, std::array<int64_t, 2>{3, 3}, std::array<int64_t, 2>{1, 1},
                                                 std::array<int64_t, 2>{1, 1}, dim));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, kUfoLayerNormEps));
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(dim * mlp_ratio), drop));
  nn::init_trunc_normal(*attn->qkv);
  nn::init_trunc_normal(*attn->proj);
  nn::init_trunc_normal(*mlp);
}

Tensor UFOBlock::forward(const Tensor& x, int64_t H, int64_t W) {
  nn::ForwardScope scope(*this);
  scope.probe("input", x);  // what the block adds to: `tessera explain` draws its relative update
  const bool train = is_training();
  Tensor y = nn::drop_path_residual(x, attn->forward(norm1->forward(x)), gamma1, drop_path_, train);
  Tensor local = nn::map_to_tokens(local_conv->forward(nn::tokens_to_map(norm3->forward(y), H, W, "UFOBlock")));
  y = nn::drop_path_residual(y, local, gamma3, drop_path_, train);
  return scope.output(nn::drop_path_residual(y, mlp->forward(norm2->forward(y)), gamma2, drop_path_, train));
}

UFOClassAttentionBlock::UFOClassAttentionBlock(int64_t dim, int64_t attn_dim, int64_t heads, double mlp_ratio,
                                               double init_values, double drop) {
  gamma_1 = register_parameter("gamma_1", full({dim}, init_values));
  gamma_2 = register_parameter("gamma_2", full({dim}, init_values));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, kUfoLayerNormEps));
  attn = register_module("attn", std::make_shared<nn::UFOClassAttention>(dim, attn_dim, heads, true, 0.0));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, kUfoLayerNormEps));
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(dim * mlp_ratio), drop));
  for (auto* l : {attn->q.get(), attn->k.get(), attn->v.get(), attn->proj.get()}) nn::init_trunc_normal(*l);
  nn::init_trunc_normal(*mlp);
}

Tensor UFOClassAttentionBlock::forward(const Tensor& patches, const Tensor& cls) {
  nn::ForwardScope scope(*this);
  scope.probe("input", cls);  // the block updates the class token alone
  Tensor c = layer_scale_residual(cls, attn->forward(norm1->forward(cat({cls, patches}, 1))), gamma_1);
  return scope.output(layer_scale_residual(c, mlp->forward(norm2->forward(c)), gamma_2));
}

UfoVit::UfoVit(const UfoVitConfig& c) : config(c) {
  const int64_t d = c.embed_dim;
  TS_CHECK(c.patch_size > 0 && c.img_size > 0 && c.img_size % c.patch_size == 0, "UfoVit: image size ", c.img_size,
           " is not a multiple of patch size ", c.patch_size);
  const int64_t grid = c.img_size / c.patch_size;
  num_classes = c.num_classes;
  default_img_size = c.img_size;
  in_chans = c.in_chans;
  cls_token = register_parameter("cls_token", zeros({1, 1, d}));
  pos_embed = register_parameter("pos_embed", zeros({1, grid * grid, d}));
  nn::init::trunc_normal_(cls_token, 0.02);
  nn::init::trunc_normal_(pos_embed, 0.02);
  patch_embed = register_module("patch_embed", std::make_shared<nn::ConvPatchEmbed>(c.patch_size, d, c.in_chans));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList<UFOBlock>>());
  for (int64_t i = 0; i < c.depth; ++i)
    blocks->push_back(std::make_shared<UFOBlock>(d, c.attn_dim, c.num_heads, c.mlp_ratio, c.layer_scale_init,
                                                 c.drop_rate, c.drop_path_rate));
  cls_attn_blocks = register_module("cls_attn_blocks", std::make_shared<nn::ModuleList<UFOClassAttentionBlock>>());
  for (int i = 0; i < 2; ++i)
    cls_attn_blocks->push_back(std::make_shared<UFOClassAttentionBlock>(d, c.attn_dim, c.num_heads, c.mlp_ratio,
                                                                        c.layer_scale_init, c.drop_rate));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(d, kUfoLayerNormEps));
  head = register_module("head", std::make_shared<nn::Linear>(d, c.num_classes));
  nn::init_trunc_normal(*head);
}

Tensor UfoVit::forward(const Tensor& images) {
  nn::ForwardScope scope(*this);
  TS_CHECK(images.defined() && images.dim() == 4 && images.size(1) == config.in_chans &&
               images.size(2) == config.img_size && images.size(3) == config.img_size,
           "UfoVit: expected images [B, ", config.in_chans, ", ", config.img_size, ", ", config.img_size, "], got ",
           images.defined() ? images.shape() : Shape{},
           " (the learned position table fixes the input size; build the model with img_size and load weights "
           "trained at another size with load_weights)");
  const bool train = is_training();
  int64_t H = 0, W = 0;
  Tensor x = dropout(patch_embed->forward(images, &H, &W) + pos_embed, config.drop_rate, train);
  for (const auto& block : *blocks)
    x = run_block([block, H, W](const Tensor& t) { return block->forward(t, H, W); }, x);
  Tensor cls = cls_token.expand({x.size(0), 1, config.embed_dim});
  for (const auto& block : *cls_attn_blocks) cls = block->forward(x, cls);
  Tensor out = norm->forward(cat({cls, x}, 1)).select(1, 0);
  return scope.output(head->forward(dropout(out, config.drop_rate, train)));
}

nn::NamedTensors UfoVit::adapt_state_dict(nn::NamedTensors state) const {
  return resize_pos_embed_entry(std::move(state), "pos_embed", pos_embed);
}

}  // namespace tessera::models
