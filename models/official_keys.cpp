#include "tessera/models/official_keys.h"

#include <fnmatch.h>

#include <unordered_set>

#include "tessera/autograd/grad_mode.h"

namespace tessera::models {

nn::NamedTensors OfficialKeyMap::apply(nn::NamedTensors state, const nn::Module& model) const {
  if (renamed_prefixes.empty() && dropped_unless_used.empty() && split_qkv.empty()) return state;
  const auto starts_with = [](const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; };
  const auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::unordered_set<std::string> own;
  for (const auto& entry : model.state_dict()) own.insert(entry.first);
  NoGradGuard no_grad;
  nn::NamedTensors out;
  for (auto& [name, t] : state) {
    std::string key = name;
    for (const auto& [from, to] : renamed_prefixes)
      if (starts_with(key, from)) {
        key = to + key.substr(from.size());
        break;
      }
    bool dropped = false;
    for (const std::string& prefix : dropped_unless_used)
      dropped = dropped || (starts_with(key, prefix) && !own.count(key));
    if (dropped) continue;
    bool split = false;
    for (const char* kind : {"weight", "bias"}) {
      const std::string suffix = std::string("qkv.") + kind;
      if (split || !ends_with(key, suffix)) continue;
      const std::string base = key.substr(0, key.size() - suffix.size());
      for (const std::string& pattern : split_qkv) {
        if (split || ::fnmatch(pattern.c_str(), base.c_str(), 0) != 0 || !own.count(base + "q." + kind)) continue;
        if (t.dim() < 1 || t.size(0) % 3 != 0) continue;  // left as it is: the load reports the mismatch
        const int64_t n = t.size(0) / 3;
        for (int64_t j = 0; j < 3; ++j)
          out.emplace_back(base + std::string(1, "qkv"[j]) + "." + kind, t.narrow(0, j * n, n).contiguous());
        split = true;
      }
    }
    if (!split) out.emplace_back(std::move(key), std::move(t));
  }
  return out;
}

}  // namespace tessera::models
