// Token mixers a program adds to the model file format. A researcher writes an attention module in
// C++, registers it under a name, and every model file can use it as a block's `attn:`, beside the
// library's (docs/models.md, "Your own token mixer"; examples/custom_attention):
//   models::register_token_mixer("linear_attention", [](const models::TokenMixerArgs& a) {
//     return std::make_shared<LinearAttention>(a.dim, a.num_heads);
//   });
//   # my_model.yaml:   blocks: [{repeat: 6, attn: linear_attention, num_heads: 4}]
// The block around it (pre-norm residual, LayerScale, drop path, the stage's CPE, the local mixer,
// the MLP) is MixerBlock's, as for the library's mixers; the module is registered as the block's
// `attn`.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::models {

// What a block's keys give its token mixer.
struct TokenMixerArgs {
  int64_t dim = 0;         // the stage's embed_dim
  int64_t num_heads = 0;   // the block's num_heads (it divides dim: the model file's checks)
  bool qkv_bias = true;    // the block's qkv_bias
  double proj_drop = 0.0;  // dropout after the output projection: the block's, else the model's drop_rate
};

// Makes the module. Its forward maps tokens [B, T, dim] to [B, T, dim]: T = H·W patch tokens in
// row-major order, after the stage's class token when the stage has one. It initialises its own
// weights (the builder draws nothing for it). Errors it throws name the block in the model file.
using TokenMixerFactory = std::function<std::shared_ptr<nn::Module>(const TokenMixerArgs&)>;

// Registers `name` (a model file's word: letters, digits and '_', not one of the library's mixers
// nor one registered before). Call before reading a model file that uses it, as a program
// registers its models (models::register_model) before `tessera::cli::main`.
void register_token_mixer(const std::string& name, TokenMixerFactory factory);

// The factory registered as `name`; empty when none is.
TokenMixerFactory registered_token_mixer(const std::string& name);

// The names registered, sorted.
std::vector<std::string> registered_token_mixers();

}  // namespace tessera::models
