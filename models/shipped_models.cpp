// The named variants' model files by name; see models/model_file.h. The table itself is generated
// from models/files/*.yaml at build time (cmake/EmbedModelFiles.cmake).
#include <algorithm>
#include <cstring>

#include "tessera/core/error.h"
#include "tessera/models/model_file.h"

namespace tessera::models {

namespace {
const ShippedModelFile* find_shipped(const std::string& name) {
  const auto files = shipped_model_files();
  const auto it = std::lower_bound(
      files.begin(), files.end(), name,
      [](const ShippedModelFile& f, const std::string& n) { return std::strcmp(f.name, n.c_str()) < 0; });
  return it != files.end() && name == it->name ? &*it : nullptr;
}
}  // namespace

bool is_shipped_model(const std::string& name) { return find_shipped(name) != nullptr; }

std::string model_file_text(const std::string& name) {
  if (const ShippedModelFile* f = find_shipped(name)) return f->text;
  std::string similar;
  const std::string family = name.substr(0, name.find('_'));
  for (const ShippedModelFile& f : shipped_model_files())
    if (std::string(f.name).rfind(family, 0) == 0 && similar.size() < 200)
      similar += (similar.empty() ? "" : ", ") + std::string(f.name);
  throw Error("model_file_text: no model file is shipped for '" + name + "'" +
              (similar.empty() ? std::string() : "; similar: " + similar));
}

ModelSpec shipped_model_spec(const std::string& name) { return read_model_file(model_file_text(name), name + ".yaml"); }

ModelSpec config_template(const std::string& name, const std::string& source) {
  ModelSpec s = shipped_model_spec(name);
  s.name = source;
  s.source = source;
  s.lines.clear();
  return s;
}

}  // namespace tessera::models
