#include "tessera/nn/positional.h"

#include <cmath>

#include "tessera/nn/lpi.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

FourierPositionalEncoding::FourierPositionalEncoding(int64_t dim, int64_t hidden_dim, double temperature)
    : hidden_dim_(hidden_dim), temperature_(temperature) {
  token_projection =
      register_module("token_projection", std::make_shared<Conv2d>(2 * hidden_dim, dim, std::array<int64_t, 2>{1, 1}));
}

Tensor FourierPositionalEncoding::forward(int64_t batch, int64_t grid_h, int64_t grid_w) {
  ForwardScope scope(*this);
  // [2·hidden, Hp, Wp]: the row features first, then the column features; within each, channel
  // 2m is sin and 2m+1 cos of the same frequency.
  const double scale = 2 * M_PI, eps = 1e-6;
  const int64_t C = 2 * hidden_dim_;
  Tensor grid = Tensor::empty({1, C, grid_h, grid_w});
  float* g = grid.data<float>();
  for (int64_t c = 0; c < C; ++c) {
    const bool row = c < hidden_dim_;
    const int64_t k = c % hidden_dim_;
    const double freq = std::pow(temperature_, 2.0 * static_cast<double>(k / 2) / static_cast<double>(hidden_dim_));
    for (int64_t i = 0; i < grid_h; ++i)
      for (int64_t j = 0; j < grid_w; ++j) {
        double pos = row ? (i + 1) / (grid_h + eps) * scale : (j + 1) / (grid_w + eps) * scale;
        double a = pos / freq;
        g[(c * grid_h + i) * grid_w + j] = static_cast<float>(k % 2 == 0 ? std::sin(a) : std::cos(a));
      }
  }
  Tensor device_grid = grid.to(token_projection->weight.device()).to(token_projection->weight.dtype());
  Tensor pos = map_to_tokens(token_projection->forward(device_grid));  // [1, N, dim]
  return scope.output(pos.expand({batch, grid_h * grid_w, pos.size(2)}));
}

}  // namespace tessera::nn
