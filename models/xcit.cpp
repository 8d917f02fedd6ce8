#include "tessera/models/xcit.h"

#include "tessera/nn/init.h"
#include "tessera/ops/ops.h"

namespace tessera::models {

namespace {
constexpr double kXcitLayerNormEps = 1e-6;

}  // namespace

XCABlock::XCABlock(int64_t dim, int64_t heads, double mlp_ratio, double eta, double drop, double drop_path)
    : drop_path_(drop_path) {
  gamma1 = register_parameter("gamma1", full({dim}, eta));
  gamma3 = register_parameter("gamma3", full({dim}, eta));
  gamma2 = register_parameter("gamma2", full({dim}, eta));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, kXcitLayerNormEps));
  attn = register_module("attn", std::make_shared<nn::XCA>(dim, heads, true, 0.0, drop));
  norm3 = register_module("norm3", std::make_shared<nn::LayerNorm>(dim, kXcitLayerNormEps));
  local_mp = register_module("local_mp", std::make_shared<nn::LPI>(dim));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, kXcitLayerNormEps));
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(dim * mlp_ratio), drop));
  nn::init_trunc_normal(*attn->qkv);
  nn::init_trunc_normal(*attn->proj);
  nn::init_trunc_normal(*mlp);
}

Tensor XCABlock::forward(const Tensor& x, int64_t H, int64_t W) {
  nn::ForwardScope scope(*this);
  scope.probe("input", x);  // what the block adds to: `tessera explain` draws its relative update
  const bool train = is_training();
  Tensor y = nn::drop_path_residual(x, attn->forward(norm1->forward(x)), gamma1, drop_path_, train);
  y = nn::drop_path_residual(y, local_mp->forward(norm3->forward(y), H, W), gamma3, drop_path_, train);
  return scope.output(nn::drop_path_residual(y, mlp->forward(norm2->forward(y)), gamma2, drop_path_, train));
}

XcitClassAttentionBlock::XcitClassAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio, double eta, double drop,
                                                 bool tokens_norm)
    : tokens_norm_(tokens_norm) {
  gamma1 = register_parameter("gamma1", full({dim}, eta));
  gamma2 = register_parameter("gamma2", full({dim}, eta));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, kXcitLayerNormEps));
  attn = register_module("attn", std::make_shared<nn::ClassAttention>(dim, heads, true, 0.0, drop));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, kXcitLayerNormEps));
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(dim * mlp_ratio), drop));
  for (auto* l : {attn->q.get(), attn->k.get(), attn->v.get(), attn->proj.get()}) nn::init_trunc_normal(*l);
  nn::init_trunc_normal(*mlp);
}

Tensor XcitClassAttentionBlock::forward(const Tensor& x) {
  nn::ForwardScope scope(*this);
  scope.probe("input", x);
  const int64_t N = x.size(1);
  Tensor xn = norm1->forward(x);
  // The class token gets attention; the patch tokens get their normalised selves back.
  Tensor y = layer_scale_residual(x, cat({attn->forward(xn), xn.narrow(1, 1, N - 1)}, 1), gamma1);
  y = tokens_norm_ ? norm2->forward(y) : cat({norm2->forward(y.narrow(1, 0, 1)), y.narrow(1, 1, N - 1)}, 1);
  Tensor cls = gamma2 * mlp->forward(y.narrow(1, 0, 1));
  // The patch tokens double, as in timm and the official code.
  return scope.output(y + cat({cls, y.narrow(1, 1, N - 1)}, 1));
}

Xcit::Xcit(const XcitConfig& c) : config(c) {
  const int64_t d = c.embed_dim;
  TS_CHECK(c.img_size % c.patch_size == 0, "Xcit: image size ", c.img_size, " is not a multiple of patch size ",
           c.patch_size);
  num_classes = c.num_classes;
  default_img_size = c.img_size;
  in_chans = c.in_chans;
  cls_token = register_parameter("cls_token", zeros({1, 1, d}));
  nn::init::trunc_normal_(cls_token, 0.02);
  patch_embed = register_module("patch_embed", std::make_shared<nn::ConvPatchEmbed>(c.patch_size, d, c.in_chans));
  pos_embed = register_module("pos_embed", std::make_shared<nn::FourierPositionalEncoding>(d));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList<XCABlock>>());
  for (int64_t i = 0; i < c.depth; ++i)
    blocks->push_back(std::make_shared<XCABlock>(d, c.num_heads, c.mlp_ratio, c.eta, c.drop_rate, c.drop_path_rate));
  cls_attn_blocks = register_module("cls_attn_blocks", std::make_shared<nn::ModuleList<XcitClassAttentionBlock>>());
  for (int i = 0; i < 2; ++i)
    cls_attn_blocks->push_back(
        std::make_shared<XcitClassAttentionBlock>(d, c.num_heads, c.mlp_ratio, c.eta, c.drop_rate, c.tokens_norm));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(d, kXcitLayerNormEps));
  head = register_module("head", std::make_shared<nn::Linear>(d, c.num_classes));
  nn::init_trunc_normal(*head);
}

Tensor Xcit::forward(const Tensor& images) {
  nn::ForwardScope scope(*this);
  TS_CHECK(images.dim() == 4 && images.size(1) == config.in_chans, "Xcit: expected images [B, ", config.in_chans,
           ", H, W], got ", images.shape());
  const bool train = is_training();
  int64_t H = 0, W = 0;
  Tensor x = patch_embed->forward(images, &H, &W);
  x = dropout(x + pos_embed->forward(x.size(0), H, W), config.drop_rate, train);
  for (const auto& block : *blocks)
    x = run_block([block, H, W](const Tensor& t) { return block->forward(t, H, W); }, x);
  x = cat({cls_token.expand({x.size(0), 1, config.embed_dim}), x}, 1);
  for (const auto& block : *cls_attn_blocks) x = block->forward(x);
  Tensor cls = norm->forward(x).select(1, 0);
  return scope.output(head->forward(dropout(cls, config.drop_rate, train)));
}

// facebookresearch/xcit's names (models/official_keys.h): its Fourier encoding is "pos_embeder", and
// its class attention projects q, k, v with one Linear.
const OfficialKeyMap& Xcit::official_keys() const {
  static const OfficialKeyMap map{{{"pos_embeder.", "pos_embed."}}, {}, {"cls_attn_blocks.*.attn."}};
  return map;
}

}  // namespace tessera::models
