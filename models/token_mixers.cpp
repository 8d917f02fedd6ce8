#include "tessera/models/token_mixers.h"

#include <algorithm>

#include "tessera/core/error.h"
#include "tessera/core/named_registry.h"
#include "tessera/models/model_file_names.h"

namespace tessera::models {

namespace {

NamedRegistry<TokenMixerFactory>& mixer_registry() {
  static NamedRegistry<TokenMixerFactory> r;
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
  TS_CHECK(mixer_registry().add(name, std::move(factory)), "register_token_mixer: a token mixer named '", name,
           "' is already registered");
}

TokenMixerFactory registered_token_mixer(const std::string& name) { return mixer_registry().find(name); }

std::vector<std::string> registered_token_mixers() { return mixer_registry().names(); }

}  // namespace tessera::models
