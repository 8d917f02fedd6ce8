// Layer-wise learning-rate decay; the layer rules are in train/layer_decay.h.
#include "tessera/train/layer_decay.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "tessera/core/error.h"

namespace tessera::train {

namespace {

// What follows `prefix` in `word` when that is all digits (CoaT's stage number), else -1.
int64_t numbered(const std::string& word, const std::string& prefix) {
  if (word.size() <= prefix.size() || word.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = word.substr(prefix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return -1;
  return std::stoll(digits);
}

// A parameter's sort key (compared as Python compares tuples) and whether it joins the layer
// before it (timm's MATCH_PREV_GROUP).
struct LayerKey {
  std::vector<double> key;
  bool joins_previous = false;
};

LayerKey layer_key(const std::string& name) {
  const size_t dot = name.find('.');
  const std::string first = name.substr(0, dot);
  double index = -1;  // the block number after "<list>."
  if (dot != std::string::npos) {
    const size_t next = name.find('.', dot + 1);
    const std::string second = name.substr(dot + 1, next == std::string::npos ? std::string::npos : next - dot - 1);
    if (!second.empty() && second.size() <= 9 &&
        std::all_of(second.begin(), second.end(), [](unsigned char c) { return std::isdigit(c); }))
      index = static_cast<double>(std::stoll(second));
  }
  if (first == "cls_token" || first == "pos_embed" || first == "patch_embed") return {{0}};
  if (first == "blocks" && index >= 0) return {{1, index}};
  for (const char* stem : {"patch_embed", "cls_token", "cpe", "crpe"})
    if (const int64_t s = numbered(first, stem); s >= 0) return {{1, static_cast<double>(s), -1}};
  if (const int64_t s = numbered(first, "serial_blocks"); s >= 0 && index >= 0)
    return {{1, static_cast<double>(s), index}};
  if ((first == "cls_attn_blocks" || first == "blocks_token_only" || first == "parallel_blocks") && index >= 0)
    return {{2, index}};
  if (first == "norm" || numbered(first, "norm") >= 0 || first == "aggregate") return {{2, 99999}, true};
  return {{std::numeric_limits<double>::infinity()}};
}

}  // namespace

std::vector<int64_t> layer_ids(const std::vector<std::string>& names) {
  std::map<std::vector<double>, bool> keys;  // sorted as group_parameters sorts them
  std::vector<std::vector<double>> of_name;
  for (const std::string& name : names) {
    LayerKey k = layer_key(name);
    keys[k.key] = k.joins_previous;
    of_name.push_back(std::move(k.key));
  }
  std::map<std::vector<double>, int64_t> id_of;
  int64_t id = -1;
  for (const auto& [key, joins] : keys) {
    if (id < 0 || !joins) ++id;
    id_of[key] = id;
  }
  std::vector<int64_t> out;
  for (const auto& key : of_name) out.push_back(id_of[key]);
  return out;
}

std::vector<ParamGroup> param_groups_layer_decay(const nn::Module& model, double weight_decay, double layer_decay,
                                                 const std::set<std::string>& extra_no_decay) {
  TS_CHECK(std::isfinite(layer_decay) && layer_decay > 0.0 && layer_decay <= 1.0,
           "--layer-decay: expected a factor in (0, 1], got ", layer_decay);
  TS_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0,
           "param_groups_layer_decay: weight_decay must be finite and >= 0, got ", weight_decay);
  std::vector<std::pair<std::string, Tensor>> params;
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) {  // frozen parameters are not optimised
      params.emplace_back(name, p);
      names.push_back(name);
    }
  const std::vector<int64_t> ids = layer_ids(names);
  const int64_t layers = ids.empty() ? 0 : *std::max_element(ids.begin(), ids.end()) + 1;
  std::vector<ParamGroup> groups(static_cast<size_t>(2 * layers));  // [2·layer + (decay ? 1 : 0)]
  for (size_t i = 0; i < params.size(); ++i) {
    const bool decay = weight_decay != 0.0 && !skip_weight_decay(params[i].first, params[i].second, extra_no_decay);
    ParamGroup& g = groups[static_cast<size_t>(2 * ids[i] + (decay ? 1 : 0))];
    g.params.push_back(params[i]);
    g.weight_decay = decay ? weight_decay : 0.0;
    g.lr_scale = std::pow(layer_decay, static_cast<double>(layers - 1 - ids[i]));
  }
  std::erase_if(groups, [](const ParamGroup& g) { return g.params.empty(); });
  return groups;
}

}  // namespace tessera::train
