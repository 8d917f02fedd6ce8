// CoaT's conv-attentional module (Xu et al. 2021, "Co-Scale Conv-Attentional Image Transformers", §4,
// Fig. 2). Token sequences are [B, 1+H·W, C]: a CLS token followed by the image tokens in row-major
// grid order. Names follow timm's coat.py (cpe*.proj, crpe*.conv_list.*, factoratt_crpe.qkv/proj).
//
//   ConvPosEnc (CPE, "Convolutional Position Encoding"): a depthwise 3x3 convolution of the image
//     tokens added back to them (x_img + DWConv(x_img)); the CLS token passes unchanged.
//   ConvRelPosEnc (CRPE, Eq. 10-11): ÊV_img = Q_img ∘ DepthwiseConv2D(P, V_img), ÊV = concat(0, ÊV_img):
//     each channel of each head is an "internal head" (Eq. 7-9) whose relative position weights P
//     are a depthwise kernel; heads are split into groups with windows 3, 5 and 7. The CLS row is 0.
//   FactorAttnConvRelPosEnc (Eq. 12): ConvAtt(X) = Q/√C_h · (softmax(K)ᵀ V) + ÊV, the softmax taken
//     over the tokens (CLS included) separately per channel (Eq. 3), so no N x N map is formed.
//     The 1/√C_h scale applies to the factorized term only; ÊV uses the unscaled Q.
// One CPE and one CRPE per stage are shared by all blocks of the stage (§4.2): the model registers
// the same module under several names.
#pragma once
#include <utility>
#include <vector>

#include "tessera/nn/layers.h"

namespace tessera::nn {

class ConvPosEnc : public Module {
 public:
  explicit ConvPosEnc(int64_t dim, int64_t kernel = 3);
  // x: [B, 1+H·W, C] -> [B, 1+H·W, C]
  Tensor forward(const Tensor& x, int64_t H, int64_t W);
  std::string type_name() const override { return "ConvPosEnc"; }
  std::shared_ptr<Conv2d> proj;  // depthwise, bias, "same" padding
};

class ConvRelPosEnc : public Module {
 public:
  // windows: (kernel size, number of heads) in channel order; the heads must add up to num_heads.
  // CoaT uses {3: 2, 5: 3, 7: 3} with 8 heads.
  ConvRelPosEnc(int64_t head_dim, int64_t num_heads,
                std::vector<std::pair<int64_t, int64_t>> windows = {{3, 2}, {5, 3}, {7, 3}});
  // q, v: [B, h, 1+H·W, C_h] -> ÊV [B, h, 1+H·W, C_h] with a zero CLS row.
  Tensor forward(const Tensor& q, const Tensor& v, int64_t H, int64_t W);
  // The convolution of Eq. 10 alone: v [B, h, 1+H·W, C_h] -> DepthwiseConv2D(P, V_img)
  // [B, h, H·W, C_h] (image tokens only), for callers that fuse the product with Q
  // (factor_attention, factor_attention_merge).
  Tensor convolve_values(const Tensor& v, int64_t H, int64_t W);
  std::string type_name() const override { return "ConvRelPosEnc"; }
  std::shared_ptr<ModuleList<Conv2d>> conv_list;  // one depthwise conv per window, on heads·C_h channels
  int64_t head_dim, num_heads;

 private:
  Shape channel_splits_;
};

class FactorAttnConvRelPosEnc : public Module {
 public:
  // `crpe` is the stage's shared CRPE, registered here as the child "crpe" (an alias path).
  FactorAttnConvRelPosEnc(int64_t dim, int64_t num_heads, std::shared_ptr<ConvRelPosEnc> crpe, bool qkv_bias = true,
                          double proj_drop = 0.0);
  // x: [B, 1+H·W, C] -> [B, 1+H·W, C]. Eq. 3 and 12 run as the fused factor_attention
  // (core/levers.h: fused_factor_attention, on), or as the composed ops when the lever is off or a
  // probe listens (they hand out the context and Eq. 12's two terms).
  Tensor forward(const Tensor& x, int64_t H, int64_t W);
  std::string type_name() const override { return "FactorAttnConvRelPosEnc"; }
  std::shared_ptr<Linear> qkv, proj;
  std::shared_ptr<ConvRelPosEnc> crpe;
  int64_t num_heads;

 private:
  double proj_drop_;
};

}  // namespace tessera::nn
