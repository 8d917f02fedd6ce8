// Three hybrids no named model is (issue 49), as model files at test size (32x32 images, widths 16
// to 32): the CPU tests train them and check their gradients (tests/test_model_file.cpp), the
// device tests train them on cuda against the CPU (tests/cuda/test_models.cpp).
#pragma once
#include <string>
#include <vector>

namespace tessera::testing {

struct HybridModel {
  const char* name;
  const char* text;
};

// XCiT with talking-heads attention in its last two blocks (its LPI kept), XCiT's class attention.
inline constexpr const char* kXcitTalkingHeads = R"(tessera_model: 1
name: xcit_talking_heads
family: xcit
num_classes: 5
img_size: 32
stages:
  - embed_dim: 32
    patch_embed: conv_stem
    patch_size: 8
    pos_embed: fourier
    blocks:
      - {repeat: 2, attn: xca, num_heads: 4, local: lpi, mlp_ratio: 2, layer_scale: 1.0}
      - {repeat: 2, attn: talking_heads, num_heads: 4, local: lpi, mlp_ratio: 2, layer_scale: 1.0}
head:
  cls_token: true
  class_attention: {repeat: 2, style: xcit, num_heads: 4, mlp_ratio: 2, layer_scale: 1.0, tokens_norm: true}
)";

// CaiT with XCA as its self-attention: CaiT's patches, positions, LayerScale, names and class
// attention around cross-covariance attention.
inline constexpr const char* kCaitXca = R"(tessera_model: 1
name: cait_xca
family: cait
num_classes: 5
img_size: 32
stages:
  - embed_dim: 32
    patch_embed: linear
    patch_size: 8
    pos_embed: learned
    blocks:
      - {repeat: 3, attn: xca, num_heads: 4, mlp_ratio: 2, layer_scale: 0.1}
head:
  cls_token: true
  class_attention: {repeat: 2, style: cait, num_heads: 4, mlp_ratio: 2, layer_scale: 0.1}
)";

// CoaT-Lite's four stages of factorised attention, topped by CaiT's class attention on the last
// stage's class token.
inline constexpr const char* kCoatLiteClassAttention = R"(tessera_model: 1
name: coat_lite_class_attention
family: coat
num_classes: 5
img_size: 32
stages:
  - {embed_dim: 16, patch_embed: linear_norm, patch_size: 4, pos_embed: conv, cls_token: true,
     blocks: [{repeat: 1, attn: factor_attention, num_heads: 8, mlp_ratio: 2}]}
  - {embed_dim: 16, patch_embed: linear_norm, patch_size: 2, pos_embed: conv, cls_token: true,
     blocks: [{repeat: 1, attn: factor_attention, num_heads: 8, mlp_ratio: 2}]}
  - {embed_dim: 16, patch_embed: linear_norm, patch_size: 2, pos_embed: conv, cls_token: true,
     blocks: [{repeat: 1, attn: factor_attention, num_heads: 8, mlp_ratio: 2}]}
  - {embed_dim: 16, patch_embed: linear_norm, patch_size: 2, pos_embed: conv, cls_token: true,
     blocks: [{repeat: 1, attn: factor_attention, num_heads: 8, mlp_ratio: 2}]}
head:
  class_attention: {repeat: 2, style: cait, num_heads: 4, mlp_ratio: 2, layer_scale: 0.1}
)";

inline std::vector<HybridModel> hybrid_models() {
  return {{"XCiT with talking heads", kXcitTalkingHeads},
          {"CaiT with XCA", kCaitXca},
          {"CoaT-Lite with class attention", kCoatLiteClassAttention}};
}

}  // namespace tessera::testing
