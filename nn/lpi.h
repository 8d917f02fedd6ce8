// Local Patch Interaction (XCiT §3.1): two depthwise 3x3 convolutions with GELU and BatchNorm in
// between (conv1 -> GELU -> bn -> conv2), applied to the token grid. XCA mixes channels only; LPI
// gives patches explicit contact with their neighbours.
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

class LPI : public Module {
 public:
  explicit LPI(int64_t dim, int64_t kernel = 3);
  // x: tokens [B, H·W, d] in row-major grid order -> [B, H·W, d]
  Tensor forward(const Tensor& x, int64_t H, int64_t W);
  std::string type_name() const override { return "LPI"; }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn;
};

// Tokens [B, H·W, C] <-> feature map [B, C, H, W] (token n = y·W + x).
Tensor tokens_to_map(const Tensor& tokens, int64_t H, int64_t W, const char* op);
Tensor map_to_tokens(const Tensor& map);

}  // namespace tessera::nn
