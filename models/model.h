// What every classification model offers: images [B, C, H, W] -> logits [B, num_classes], and the
// options users set when building one by name (models/registry.h).
#pragma once
#include <functional>
#include <map>
#include <string>

#include "tessera/nn/checkpoint.h"
#include "tessera/nn/module.h"
#include "tessera/models/official_keys.h"

namespace tessera::models {

struct ModelOptions {
  int64_t num_classes = 1000;
  int64_t img_size = 0;  // 0: the variant's default (224, 384, ...)
  int64_t in_chans = 3;
  int64_t patch_size = 0;        // 0: the variant's; XCiT also takes 4 for 28x28 / 32x32 inputs
  double drop_rate = 0.0;        // dropout on projections, MLPs and before the head
  double drop_path_rate = 0.0;   // stochastic depth, the same rate in every block (as timm)
  double layer_scale_init = -1;  // < 0: the variant's default (eta / init_values)
  // timm's model_kwargs: fields of the variant's architecture to change, by timm's argument names
  // ({"depth", 6}). XCiT, CaiT and UFO-ViT take depth, embed_dim, num_heads and mlp_ratio (UFO-ViT
  // also attn_dim); CoaT takes num_heads and parallel_depth. Any other key is an error.
  std::map<std::string, double> model_kwargs = {};
  // Where the model lives. It is always built (and initialised) on the CPU and then moved, so a
  // seed gives the same initial weights on every device.
  Device device = Device::cpu();
};

class Model : public nn::Module {
 public:
  Tensor forward(const Tensor& images) override = 0;
  // Loads weights that may come from the same variant at another resolution: adapt_state_dict
  // first brings resolution-bound entries (a learned position table) to this model's size, then
  // load_state_dict checks and copies everything (strict: every problem is one error).
  nn::LoadReport load_weights(const nn::NamedTensors& state, bool strict = true) {
    return load_state_dict(to_own_names(state), strict);
  }
  // Weights as a file brings them, in this model's names and sizes: the paper's official names
  // mapped to timm's (official_keys), then the resolution-bound entries adapted.
  nn::NamedTensors to_own_names(nn::NamedTensors state) const {
    return adapt_state_dict(official_keys().apply(std::move(state), *this));
  }
  // The family's official-checkpoint names (models/official_keys.h); none by default.
  virtual const OfficialKeyMap& official_keys() const {
    static const OfficialKeyMap none;
    return none;
  }
  // The identity for models without resolution-bound weights (XCiT's Fourier encoding and CoaT's
  // convolutional encodings take any size).
  virtual nn::NamedTensors adapt_state_dict(nn::NamedTensors state) const { return state; }
  int64_t num_classes = 0;
  int64_t default_img_size = 0;  // the resolution it was built for
  int64_t in_chans = 3;
  // timm's set_grad_checkpointing (train.py --grad-checkpointing): in training, each block of the
  // trunk keeps only its input for the backward pass and recomputes the rest there
  // (nn/checkpoint.h): a fraction of the activation memory for about a third more compute.
  bool grad_checkpointing = false;

 protected:
  // block(x), checkpointed when grad_checkpointing is on and the model trains. `block` is kept
  // until the backward pass: capture the block's module by value (a shared_ptr) and sizes.
  Tensor run_block(std::function<Tensor(const Tensor&)> block, const Tensor& x) const {
    return grad_checkpointing && is_training() ? nn::checkpoint(std::move(block), x) : block(x);
  }
};

}  // namespace tessera::models
