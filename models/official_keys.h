// The parameter names of the papers' official checkpoints, mapped to timm's, as data: one
// OfficialKeyMap per family, kept in the family's model file (the same renames, splits and drops
// as timm's checkpoint_filter_fn of that family). A file already in timm's names passes unchanged.
//
//   XCiT (facebookresearch/xcit): the Fourier position encoding is "pos_embeder"; the class-attention
//     blocks project q, k and v in one "qkv" Linear, which timm (computing q for the class token
//     only) splits into q, k and v.
//   CaiT (facebookresearch/deit): timm's names.
//   CoaT (mlpc-ucsd/CoaT): norm, aggregate and head layers the variant does not use.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::models {

struct OfficialKeyMap {
  // A key beginning with .first begins with .second instead.
  std::vector<std::pair<std::string, std::string>> renamed_prefixes;
  // Keys beginning with one of these that the model does not have are dropped.
  std::vector<std::string> dropped_unless_used;
  // fnmatch patterns of the prefix P of "P" "qkv.weight" / "qkv.bias" entries that the model holds
  // as P "q.", P "k." and P "v.": the rows are split in three, in that order.
  std::vector<std::string> split_qkv;

  // `state` in the names of `model` (whose state_dict says which keys exist).
  nn::NamedTensors apply(nn::NamedTensors state, const nn::Module& model) const;
};

}  // namespace tessera::models
