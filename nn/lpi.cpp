#include "tessera/nn/lpi.h"

#include "tessera/core/levers.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

Tensor tokens_to_map(const Tensor& tokens, int64_t H, int64_t W, const char* op) {
  TS_CHECK(tokens.dim() == 3 && tokens.size(1) == H * W, op, ": expected tokens [B, ", H * W, ", C] for a ", H, "x", W,
           " grid, got ", tokens.shape());
  return tokens.transpose(1, 2).reshape({tokens.size(0), tokens.size(2), H, W});
}

Tensor map_to_tokens(const Tensor& map) { return map.flatten(2).transpose(1, 2); }

LPI::LPI(int64_t dim, int64_t kernel) {
  const std::array<int64_t, 2> k{kernel, kernel}, pad{kernel / 2, kernel / 2};
  conv1 = register_module("conv1", std::make_shared<Conv2d>(dim, dim, k, std::array<int64_t, 2>{1, 1}, pad, dim));
  bn = register_module("bn", std::make_shared<BatchNorm2d>(dim));
  conv2 = register_module("conv2", std::make_shared<Conv2d>(dim, dim, k, std::array<int64_t, 2>{1, 1}, pad, dim));
}

Tensor LPI::forward(const Tensor& x, int64_t H, int64_t W) {
  ForwardScope scope(*this);
  const Tensor m = tokens_to_map(x, H, W, "LPI");
  // conv1 and GELU in one op (ops/depthwise_conv2d_gelu.h, lever TESSERA_FUSED_DEPTHWISE_GELU): one
  // pass over the token map forward, and no pre-activation kept for the backward. BatchNorm stays
  // apart: in training it needs the batch's statistics of the GELU's output before its affine.
  const Tensor h = levers().fused_depthwise_gelu
                       ? depthwise_conv2d_gelu(m, conv1->weight, conv1->bias, conv1->stride, conv1->padding)
                       : gelu(conv1->forward(m));
  return scope.output(map_to_tokens(conv2->forward(bn->forward(h))));
}

}  // namespace tessera::nn
