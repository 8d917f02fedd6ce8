// What every classification model offers: images [B, C, H, W] -> logits [B, num_classes], and the
// options users set when building one by name or from a model file (models/registry.h).
#pragma once
#include <functional>
#include <map>
#include <string>

#include "tessera/nn/checkpoint.h"
#include "tessera/nn/module.h"
#include "tessera/models/official_keys.h"

namespace tessera::models {

struct ModelOptions {
  // Each option changes the model file's value (models/model_file.h); 0 (a negative
  // layer_scale_init) keeps it. num_classes and in_chans default to timm's create_model's.
  int64_t num_classes = 1000;
  int64_t img_size = 0;  // the file's: the variant's 224, 384, ...
  int64_t in_chans = 3;
  int64_t patch_size = 0;        // the first stage's; XCiT and UFO-ViT also take 4 for 28x28 / 32x32 inputs
  double drop_rate = 0.0;        // dropout on projections, MLPs, after the position encoding and before the head
  double drop_path_rate = 0.0;   // stochastic depth, the same rate in every block (as timm)
  double layer_scale_init = -1;  // every LayerScale's initial value (XCiT's eta, CaiT's init_values)
  // timm's model_kwargs, by timm's argument names ({"depth", 6}). A model of one stage takes
  // embed_dim, num_heads and mlp_ratio (every block's and its class attention's), depth when the
  // stage has one list entry of blocks, and attn_dim when it has UFO attention; a model of several
  // stages (CoaT) takes num_heads and parallel_depth. Any other key is an error.
  std::map<std::string, double> model_kwargs = {};
  // Where the model lives. It is always built (and initialised) on the CPU and then moved, so a
  // seed gives the same initial weights on every device.
  Device device = Device::cpu();
};

// Options that keep every value of a model file (num_classes and in_chans 0 too): rebuilding a
// model from its model_file() with them gives the same model.
inline ModelOptions file_values() {
  ModelOptions o;
  o.num_classes = 0;
  o.in_chans = 0;
  return o;
}

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

  // The model file this model was built from (models/model_file.h), every value ModelOptions
  // changed written in: create_model_from_text(model_file(), name, file_values()) builds the same
  // model. Empty for a model a program builds itself (register_model's factories).
  const std::string& model_file() const { return model_file_; }

 protected:
  // block(x), checkpointed when grad_checkpointing is on and the model trains. `block` is kept
  // until the backward pass: capture the block's module by value (a shared_ptr) and sizes.
  Tensor run_block(std::function<Tensor(const Tensor&)> block, const Tensor& x) const {
    return grad_checkpointing && is_training() ? nn::checkpoint(std::move(block), x) : block(x);
  }
  std::string model_file_;
};

}  // namespace tessera::models
