// XCiT's Fourier positional encoding (§3.1, following DETR's sine encoding): for a token grid of
// Hp x Wp, each position gets 32 sine/cosine features of its normalised row and 32 of its column,
// at frequencies 10000^(2⌊k/2⌋/32); a 1x1 convolution (token_projection) maps the 64 channels to
// the embedding width. Nothing is learned per position, so any grid size works.
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

class FourierPositionalEncoding : public Module {
 public:
  explicit FourierPositionalEncoding(int64_t dim, int64_t hidden_dim = 32, double temperature = 10000.0);
  // Returns [B, Hp·Wp, dim].
  Tensor forward(int64_t batch, int64_t grid_h, int64_t grid_w);
  std::string type_name() const override { return "PositionalEncodingFourier"; }
  std::shared_ptr<Conv2d> token_projection;

 private:
  int64_t hidden_dim_;
  double temperature_;
};

}  // namespace tessera::nn
