// Layer-wise learning-rate decay (timm's --layer-decay, timm/optim/_param_groups.py:
// param_groups_layer_decay, after BEiT): layers near the input learn slower than those near the
// head. Every parameter gets a layer id from its name; with L layers, layer i trains at
// lr · layer_decay^(L − 1 − i), so the head (the last layer) trains at the full lr.
//
// Layer ids follow timm's group_matcher(coarse=False) of the families Tessera implements, as
// group_parameters numbers them (distinct sort keys in order; a key marked "joins the previous"
// shares the layer before it):
//   cls_token, pos_embed, patch_embed                 the stem: layer 0
//   blocks.<i>                                          one layer each (XCiT, CaiT, UFO-ViT)
//   serial_blocks<s>.<i> after patch_embed<s>, cls_token<s>, cpe<s>, crpe<s>
//                                                       CoaT: each stage's embedding, then its blocks
//   cls_attn_blocks.<i>, blocks_token_only.<i>, parallel_blocks.<i>
//                                                       one layer each, after the blocks
//   norm, norm<k>, aggregate                            join the last of those
//   anything else (the head)                            the last layer
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tessera/nn/module.h"
#include "tessera/train/optimizer.h"

namespace tessera::train {

// The layer id of each name (0-based, consecutive), for the names of one model.
std::vector<int64_t> layer_ids(const std::vector<std::string>& names);

// param_groups with layer-wise lr decay: one group per (layer, decay or no decay) that has
// parameters, in layer order with no-decay first, each with lr_scale = layer_decay^(L − 1 − layer).
// Weight-decay exclusions are skip_weight_decay's. layer_decay must be in (0, 1].
std::vector<ParamGroup> param_groups_layer_decay(const nn::Module& model, double weight_decay, double layer_decay,
                                                 const std::set<std::string>& extra_no_decay = {});

}  // namespace tessera::train
