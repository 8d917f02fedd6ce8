// Position-table resampling; see models/pos_embed.h.
#include "tessera/models/pos_embed.h"

#include <cmath>

#include "tessera/autograd/grad_mode.h"
#include "tessera/nn/lpi.h"
#include "tessera/ops/interpolate.h"

namespace tessera::models {

Tensor resize_pos_embed(const Tensor& pos, std::array<int64_t, 2> old_grid, std::array<int64_t, 2> new_grid) {
  TS_CHECK(old_grid[0] > 0 && old_grid[1] > 0 && new_grid[0] > 0 && new_grid[1] > 0,
           "resize_pos_embed: grids must be positive, got ", old_grid[0], "x", old_grid[1], " -> ", new_grid[0], "x",
           new_grid[1]);
  TS_CHECK(pos.defined() && pos.dim() == 3 && pos.size(0) == 1 && pos.size(1) == old_grid[0] * old_grid[1],
           "resize_pos_embed: expected pos [1, ", old_grid[0] * old_grid[1], ", d] for a ", old_grid[0], "x",
           old_grid[1], " grid, got ", pos.defined() ? pos.shape() : Shape{});
  if (old_grid == new_grid) return pos;
  Tensor map = nn::tokens_to_map(pos, old_grid[0], old_grid[1], "resize_pos_embed");  // [1, d, gh, gw]
  return nn::map_to_tokens(interpolate(map, new_grid, InterpolationMode::Bicubic));
}

namespace {
int64_t square_side(int64_t n) {
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  return side * side == n ? side : 0;
}
}  // namespace

nn::NamedTensors resize_pos_embed_entry(nn::NamedTensors state, const std::string& key, const Tensor& target) {
  const int64_t new_side = square_side(target.size(1));
  for (auto& [name, t] : state) {
    if (name != key || !t.defined() || t.dim() != 3 || t.shape() == target.shape()) continue;
    const int64_t old_side = square_side(t.size(1));
    if (old_side == 0 || new_side == 0 || t.size(0) != 1 || t.size(2) != target.size(2)) continue;
    NoGradGuard no_grad;
    t = resize_pos_embed(t, {old_side, old_side}, {new_side, new_side});
  }
  return state;
}

}  // namespace tessera::models
