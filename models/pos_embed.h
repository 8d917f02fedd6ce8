// Learned position tables (CaiT, UFO-ViT) fix the token grid a model was trained on. To run such
// a model at another resolution the table is resampled, as timm does when it loads a checkpoint
// into a model built for another img_size (CaiT §3; UFO-ViT §3.3: bicubic interpolation).
#pragma once
#include <array>
#include <string>

#include "tessera/nn/module.h"

namespace tessera::models {

// Resamples a position table pos [1, gh·gw, d] (row-major over an old_grid = {gh, gw} token grid)
// to new_grid with bicubic interpolation (PyTorch's: align_corners=False, a = -0.75, clamped
// borders) -> [1, new_h·new_w, d]. The same grid returns the table unchanged.
Tensor resize_pos_embed(const Tensor& pos, std::array<int64_t, 2> old_grid, std::array<int64_t, 2> new_grid);

// Returns `state` with its entry `key` resampled to `target`'s shape [1, n, d] when the stored
// table is a square grid of another length and the same width; anything else is left for
// load_state_dict to report as a shape mismatch.
nn::NamedTensors resize_pos_embed_entry(nn::NamedTensors state, const std::string& key, const Tensor& target);

}  // namespace tessera::models
