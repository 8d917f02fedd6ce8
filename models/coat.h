// CoaT: Co-Scale Conv-Attentional Image Transformers (Xu et al., 2021). Layout and names follow timm's
// coat.py so timm weights load as they are:
//   4 stages (patch 4, then stride-2 patch merges), each: patch embedding + LayerNorm -> prepend the
//   stage's CLS token -> serial blocks (CPE, conv-attention, MLP; §5.1 "CoaT Serial Block").
//   CoaT-Lite: LayerNorm on stage 4, head on its CLS token.
//   CoaT: then parallel blocks over stages 2-4 with co-scale feature interpolation (§5.1 "CoaT Parallel
//   Block"), LayerNorms on stages 2-4, a Conv1d(3 -> 1, k=1) over their 3 CLS tokens, head.
// The CPE and CRPE of a stage, and the MLP of a parallel block, are single modules registered under
// several names (aliases in state_dict, counted once in parameters()). The input size is fixed by
// img_size, as in timm.
#pragma once
#include <array>

#include "tessera/models/model.h"
#include "tessera/nn/conv_attention.h"
#include "tessera/nn/mlp.h"
#include "tessera/nn/patch_embed.h"

namespace tessera::models {

struct CoatConfig {
  int64_t img_size = 224, in_chans = 3, num_heads = 8;
  std::array<int64_t, 4> embed_dims{64, 128, 256, 320};
  std::array<int64_t, 4> serial_depths{2, 2, 2, 2};
  int64_t parallel_depth = 0;  // 0: CoaT-Lite
  std::array<double, 4> mlp_ratios{8, 8, 4, 4};
  int64_t num_classes = 1000;
  double drop_rate = 0.0, drop_path_rate = 0.0;
};

// Token grid of a stage.
struct CoatGrid {
  int64_t h = 0, w = 0;
};

// timm's PatchEmbed with a norm: p x p conv with stride p, then LayerNorm(eps 1e-5) on the tokens.
class CoatPatchEmbed : public nn::PatchEmbed {
 public:
  CoatPatchEmbed(int64_t patch_size, int64_t in_chans, int64_t embed_dim);
  Tensor forward(const Tensor& x, int64_t* grid_h, int64_t* grid_w);
  std::string type_name() const override { return "CoatPatchEmbed"; }
  std::shared_ptr<nn::LayerNorm> norm;
};

// Serial block (Fig. 4): x = CPE(x); x += ConvAtt(LN(x)); x += MLP(LN(x)). `cpe` and the CRPE
// inside factoratt_crpe are the stage's shared modules.
class CoatSerialBlock : public nn::Module {
 public:
  CoatSerialBlock(int64_t dim, int64_t heads, double mlp_ratio, std::shared_ptr<nn::ConvPosEnc> cpe,
                  std::shared_ptr<nn::ConvRelPosEnc> crpe, double drop, double drop_path);
  Tensor forward(const Tensor& x, int64_t H, int64_t W);
  std::string type_name() const override { return "SerialBlock"; }
  std::shared_ptr<nn::ConvPosEnc> cpe;
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::FactorAttnConvRelPosEnc> factoratt_crpe;
  std::shared_ptr<nn::Mlp> mlp;

 private:
  double drop_path_;
};

// Parallel block (Fig. 5, "attention with feature interpolation") over stages 2-4 (index 0-2 here):
// cur_s = ConvAtt_s(LN1_s(x_s)); each cur_s adds the others bilinearly resampled to its grid (CLS
// rows summed); x_s += cur_s; x_s += MLP(LN2_s(x_s)) with one MLP shared by the three scales. The
// caller applies the stages' CPEs first (as timm's CoaT.forward_features).
class CoatParallelBlock : public nn::Module {
 public:
  CoatParallelBlock(int64_t dim, int64_t heads, double mlp_ratio,
                    const std::array<std::shared_ptr<nn::ConvRelPosEnc>, 3>& crpes, double drop, double drop_path);
  std::array<Tensor, 3> forward(const std::array<Tensor, 3>& x, const std::array<CoatGrid, 3>& grids);
  std::string type_name() const override { return "ParallelBlock"; }
  std::array<std::shared_ptr<nn::LayerNorm>, 3> norm1, norm2;  // norm12..14, norm22..24
  std::array<std::shared_ptr<nn::FactorAttnConvRelPosEnc>, 3> factoratt_crpe;
  std::shared_ptr<nn::Mlp> mlp;  // registered as mlp2, mlp3 and mlp4

 private:
  double drop_path_;
};

// Tokens [B, 1+h·w, C] on grid `from` -> [B, 1+to.h·to.w, C]: the image tokens resized bilinearly
// (align_corners=false), the CLS row carried unchanged.
Tensor resample_tokens(const Tensor& x, CoatGrid from, CoatGrid to);

// The CoaT head's `aggregate`: torch.nn.Conv1d(3, 1, kernel_size=1) over the stacked CLS tokens
// [B, 3, C] -> [B, C], i.e. w0·cls2 + w1·cls3 + w2·cls4 + b (PyTorch default init).
class CoatAggregate : public nn::Module {
 public:
  CoatAggregate();
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv1d"; }
  Tensor weight, bias;  // [1, 3, 1], [1]
};

class Coat : public Model {
 public:
  explicit Coat(const CoatConfig& config);
  Tensor forward(const Tensor& images) override;
  std::string type_name() const override { return "CoaT"; }
  const OfficialKeyMap& official_keys() const override;
  CoatConfig config;
  std::array<Tensor, 4> cls_token;
  std::array<std::shared_ptr<CoatPatchEmbed>, 4> patch_embed;
  std::array<std::shared_ptr<nn::ConvPosEnc>, 4> cpe;
  std::array<std::shared_ptr<nn::ConvRelPosEnc>, 4> crpe;
  std::array<std::shared_ptr<nn::ModuleList<CoatSerialBlock>>, 4> serial_blocks;
  std::shared_ptr<nn::ModuleList<CoatParallelBlock>> parallel_blocks;  // null for CoaT-Lite
  std::shared_ptr<nn::LayerNorm> norm2, norm3;                         // null for CoaT-Lite
  std::shared_ptr<nn::LayerNorm> norm4;
  std::shared_ptr<CoatAggregate> aggregate;  // null for CoaT-Lite
  std::shared_ptr<nn::Linear> head;
};

}  // namespace tessera::models
