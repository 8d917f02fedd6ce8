#include "tessera/models/token_mixers.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "tessera/core/error.h"
#include "tessera/models/model_file_names.h"

namespace tessera::models {

namespace {

struct MixerRegistry {
  std::mutex mutex;
  std::map<std::string, TokenMixerFactory> factories;
};

MixerRegistry& mixer_registry() {
  static MixerRegistry r;
  return r;
}

bool is_word(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

void register_token_mixer(const std::string& name, TokenMixerFactory factory) {
  TS_CHECK(is_word(name), "register_token_mixer: '", name,
           "' is not a usable name (a model file's word: letters, digits and '_')");
  for (const auto& [word, kind] : file_names::kMixers)
    TS_CHECK(name != word, "register_token_mixer: '", name, "' is one of the library's token mixers");
  TS_CHECK(static_cast<bool>(factory), "register_token_mixer: the factory for '", name, "' is empty");
  MixerRegistry& r = mixer_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  TS_CHECK(r.factories.emplace(name, std::move(factory)).second, "register_token_mixer: a token mixer named '", name,
           "' is already registered");
}

TokenMixerFactory registered_token_mixer(const std::string& name) {
  MixerRegistry& r = mixer_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.factories.find(name);
  return it == r.factories.end() ? TokenMixerFactory() : it->second;
}

std::vector<std::string> registered_token_mixers() {
  MixerRegistry& r = mixer_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

}  // namespace tessera::models
