// XCiT: Cross-Covariance Image Transformers (El-Nouby et al., 2021). Layout and names follow timm's
// xcit.py so timm weights load as they are:
//   conv patch embedding -> + Fourier positions -> L x XCABlock (XCA, LPI, MLP; LayerScale each)
//   -> prepend CLS -> 2 x class-attention blocks -> LayerNorm -> head on the CLS token.
#pragma once
#include "tessera/models/model.h"
#include "tessera/nn/class_attention.h"
#include "tessera/nn/lpi.h"
#include "tessera/nn/mlp.h"
#include "tessera/nn/patch_embed.h"
#include "tessera/nn/positional.h"
#include "tessera/nn/xca.h"

namespace tessera::models {

struct XcitConfig {
  int64_t img_size = 224, patch_size = 16, embed_dim = 192, depth = 12, num_heads = 4;
  double mlp_ratio = 4.0;
  double eta = 1.0;         // LayerScale init (1.0 for 12 layers, 1e-5 for 24)
  bool tokens_norm = true;  // false only for the nano models
  int64_t num_classes = 1000, in_chans = 3;
  double drop_rate = 0.0, drop_path_rate = 0.0;
};

// One XCiT layer (Fig. 1): x += γ1·XCA(LN(x)); x += γ3·LPI(LN(x)); x += γ2·MLP(LN(x)).
class XCABlock : public nn::Module {
 public:
  XCABlock(int64_t dim, int64_t heads, double mlp_ratio, double eta, double drop, double drop_path);
  Tensor forward(const Tensor& x, int64_t H, int64_t W);
  std::string type_name() const override { return "XCABlock"; }
  Tensor gamma1, gamma3, gamma2;
  std::shared_ptr<nn::LayerNorm> norm1, norm3, norm2;
  std::shared_ptr<nn::XCA> attn;
  std::shared_ptr<nn::LPI> local_mp;
  std::shared_ptr<nn::Mlp> mlp;

 private:
  double drop_path_;
};

// XCiT's class-attention block (§3.1 "Class attention", official form): the class token attends
// to all tokens; the normalised patch tokens are added back unchanged, and the MLP runs on the
// class token only, with the normalised class token as its residual.
class XcitClassAttentionBlock : public nn::Module {
 public:
  XcitClassAttentionBlock(int64_t dim, int64_t heads, double mlp_ratio, double eta, double drop, bool tokens_norm);
  Tensor forward(const Tensor& x) override;  // [B, 1+N, d]
  std::string type_name() const override { return "ClassAttentionBlock"; }
  Tensor gamma1, gamma2;
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::ClassAttention> attn;
  std::shared_ptr<nn::Mlp> mlp;

 private:
  bool tokens_norm_;
};

class Xcit : public Model {
 public:
  explicit Xcit(const XcitConfig& config);
  Tensor forward(const Tensor& images) override;
  std::string type_name() const override { return "Xcit"; }
  const OfficialKeyMap& official_keys() const override;
  XcitConfig config;
  Tensor cls_token;
  std::shared_ptr<nn::ConvPatchEmbed> patch_embed;
  std::shared_ptr<nn::FourierPositionalEncoding> pos_embed;
  std::shared_ptr<nn::ModuleList<XCABlock>> blocks;
  std::shared_ptr<nn::ModuleList<XcitClassAttentionBlock>> cls_attn_blocks;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;
};

}  // namespace tessera::models
