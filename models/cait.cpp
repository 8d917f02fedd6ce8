#include "tessera/models/cait.h"

#include "tessera/models/pos_embed.h"

#include "tessera/nn/init.h"
#include "tessera/ops/ops.h"

namespace tessera::models {

namespace {
constexpr double kCaitLayerNormEps = 1e-6;
}

LayerScaleBlock::LayerScaleBlock(int64_t dim, int64_t heads, double mlp_ratio, double init_values, double drop,
                                 double drop_path)
    : drop_path_(drop_path) {
  gamma_1 = register_parameter("gamma_1", full({dim}, init_values));
  gamma_2 = register_parameter("gamma_2", full({dim}, init_values));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, kCaitLayerNormEps));
  attn = register_module("attn", std::make_shared<nn::TalkingHeadAttention>(dim, heads, true, 0.0, drop));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, kCaitLayerNormEps));
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(dim * mlp_ratio), drop));
  for (auto* l : {attn->qkv.get(), attn->proj.get(), attn->proj_l.get(), attn->proj_w.get()}) nn::init_trunc_normal(*l);
  nn::init_trunc_normal(*mlp);
}

Tensor LayerScaleBlock::forward(const Tensor& x) {
  nn::ForwardScope scope(*this);
  scope.probe("input", x);  // what the block adds to: `tessera explain` draws its relative update
  Tensor y = nn::drop_path_residual(x, attn->forward(norm1->forward(x)), gamma_1, drop_path_, is_training());
  return scope.output(nn::drop_path_residual(y, mlp->forward(norm2->forward(y)), gamma_2, drop_path_, is_training()));
}

LayerScaleClassAttentionBlock::LayerScaleClassAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio,
                                                             double init_values, double drop) {
  gamma_1 = register_parameter("gamma_1", full({dim}, init_values));
  gamma_2 = register_parameter("gamma_2", full({dim}, init_values));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, kCaitLayerNormEps));
  attn = register_module("attn", std::make_shared<nn::ClassAttention>(dim, heads, true, 0.0, 0.0));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, kCaitLayerNormEps));
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(dim * mlp_ratio), drop));
  for (auto* l : {attn->q.get(), attn->k.get(), attn->v.get(), attn->proj.get()}) nn::init_trunc_normal(*l);
  nn::init_trunc_normal(*mlp);
}

Tensor LayerScaleClassAttentionBlock::forward(const Tensor& patches, const Tensor& cls) {
  nn::ForwardScope scope(*this);
  scope.probe("input", cls);  // the block updates the class token alone
  Tensor u = cat({cls, patches}, 1);
  Tensor c = layer_scale_residual(cls, attn->forward(norm1->forward(u)), gamma_1);
  return scope.output(layer_scale_residual(c, mlp->forward(norm2->forward(c)), gamma_2));
}

Cait::Cait(const CaitConfig& c) : config(c) {
  const int64_t d = c.embed_dim;
  TS_CHECK(c.img_size % c.patch_size == 0, "Cait: image size ", c.img_size, " is not a multiple of patch size ",
           c.patch_size);
  const int64_t grid = c.img_size / c.patch_size;
  num_classes = c.num_classes;
  default_img_size = c.img_size;
  in_chans = c.in_chans;
  cls_token = register_parameter("cls_token", zeros({1, 1, d}));
  pos_embed = register_parameter("pos_embed", zeros({1, grid * grid, d}));
  nn::init::trunc_normal_(cls_token, 0.02);
  nn::init::trunc_normal_(pos_embed, 0.02);
  patch_embed = register_module("patch_embed", std::make_shared<nn::PatchEmbed>(c.patch_size, c.in_chans, d));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList<LayerScaleBlock>>());
  for (int64_t i = 0; i < c.depth; ++i)
    blocks->push_back(
        std::make_shared<LayerScaleBlock>(d, c.num_heads, c.mlp_ratio, c.init_values, c.drop_rate, c.drop_path_rate));
  blocks_token_only =
      register_module("blocks_token_only", std::make_shared<nn::ModuleList<LayerScaleClassAttentionBlock>>());
  for (int i = 0; i < 2; ++i)
    blocks_token_only->push_back(
        std::make_shared<LayerScaleClassAttentionBlock>(d, c.num_heads, c.mlp_ratio, c.init_values, 0.0));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(d, kCaitLayerNormEps));
  head = register_module("head", std::make_shared<nn::Linear>(d, c.num_classes));
  nn::init_trunc_normal(*head);
}

Tensor Cait::forward(const Tensor& images) {
  nn::ForwardScope scope(*this);
  TS_CHECK(images.dim() == 4 && images.size(1) == config.in_chans && images.size(2) == config.img_size &&
               images.size(3) == config.img_size,
           "Cait: expected images [B, ", config.in_chans, ", ", config.img_size, ", ", config.img_size, "], got ",
           images.shape(),
           " (the position table fixes the input size; build the model with img_size and load weights trained "
           "at another size with load_weights)");
  const bool train = is_training();
  int64_t H = 0, W = 0;
  Tensor x = dropout(patch_embed->forward(images, &H, &W) + pos_embed, config.drop_rate, train);
  for (const auto& block : *blocks) x = run_block([block](const Tensor& t) { return block->forward(t); }, x);
  Tensor cls = cls_token.expand({x.size(0), 1, config.embed_dim});
  for (const auto& block : *blocks_token_only) cls = block->forward(x, cls);
  Tensor out = norm->forward(cat({cls, x}, 1)).select(1, 0);
  return scope.output(head->forward(dropout(out, config.drop_rate, train)));
}

nn::NamedTensors Cait::adapt_state_dict(nn::NamedTensors state) const {
  return resize_pos_embed_entry(std::move(state), "pos_embed", pos_embed);
}

}  // namespace tessera::models
