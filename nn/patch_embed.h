// Convolutional patch embedding (XCiT §3.1, "conv3x3 stem"): log2(p) stride-2 3x3 convolutions,
// each followed by BatchNorm, with GELU between them (none after the last), turning an image
// [B, 3, H, W] into a grid of H/p x W/p tokens of width d. Channels double each step and end at d
// (p=16: d/8, d/4, d/2, d; p=8: d/4, d/2, d; p=4: d/2, d, for 28x28 or 32x32 inputs).
// Names as timm: proj.0.0.weight (conv), proj.0.1.* (BN), proj.1 (GELU), proj.2.0.weight, ...
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

class ConvPatchEmbed : public Module {
 public:
  ConvPatchEmbed(int64_t patch_size, int64_t embed_dim, int64_t in_chans = 3);
  // Returns tokens [B, (H/p)·(W/p), d]; *grid_h/*grid_w receive the token grid.
  Tensor forward(const Tensor& x, int64_t* grid_h, int64_t* grid_w);
  std::string type_name() const override { return "ConvPatchEmbed"; }
  int64_t patch_size;
  std::shared_ptr<Sequential> proj;
};

// Linear patch embedding (ViT, CaiT, CoaT): one p x p convolution with stride p. Names: proj.*
class PatchEmbed : public Module {
 public:
  PatchEmbed(int64_t patch_size, int64_t in_chans, int64_t embed_dim);
  Tensor forward(const Tensor& x, int64_t* grid_h, int64_t* grid_w);
  std::string type_name() const override { return "PatchEmbed"; }
  int64_t patch_size;
  std::shared_ptr<Conv2d> proj;
};

}  // namespace tessera::nn
