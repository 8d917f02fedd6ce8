#include "tessera/models/registry.h"

#include <algorithm>

#include "tessera/core/named_registry.h"
#include "tessera/models/builder.h"
#include "tessera/models/model_file.h"

namespace tessera::models {

namespace {

// What programs register (register_model). The shipped variants are not here: they are files.
NamedRegistry<ModelFactory>& registry() {
  static NamedRegistry<ModelFactory> r;
  return r;
}

ModelFactory registered(const std::string& name) { return registry().find(name); }

}  // namespace

bool is_model_path(const std::string& s) {
  auto ends_with = [&](const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml") || s.find('/') != std::string::npos;
}

namespace {

bool is_path(const std::string& s) { return is_model_path(s); }

// The file's model with the user's options, on their device.
std::shared_ptr<Model> build_with_options(ModelSpec spec, const ModelOptions& options) {
  apply_options(spec, options);
  std::shared_ptr<Model> model = build_model(spec);
  model->to(options.device);
  return model;
}

}  // namespace

void register_model(const std::string& name, ModelFactory factory) {
  TS_CHECK(!name.empty() && name.find_first_of(" \t\n=,/") == std::string::npos && !is_path(name), "register_model: '",
           name, "' is not a usable model name (no spaces, '=', ',', '/' or .yaml ending)");
  TS_CHECK(static_cast<bool>(factory), "register_model: the factory for '", name, "' is empty");
  TS_CHECK(!is_shipped_model(name), "register_model: a model named '", name, "' is already registered");
  TS_CHECK(registry().add(name, std::move(factory)), "register_model: a model named '", name,
           "' is already registered");
}

std::shared_ptr<Model> create_model_from_text(const std::string& text, const std::string& source,
                                              const ModelOptions& options) {
  return build_with_options(read_model_file(text, source), options);
}

std::shared_ptr<Model> create_model(const std::string& name, const ModelOptions& options) {
  if (is_shipped_model(name)) return create_model_from_text(model_file_text(name), name + ".yaml", options);
  if (ModelFactory factory = registered(name)) {
    TS_CHECK(options.num_classes >= 0, "create_model: num_classes must be positive, got ", options.num_classes);
    ModelOptions o = options;
    if (o.num_classes == 0) o.num_classes = 1000;
    if (o.in_chans == 0) o.in_chans = 3;
    std::shared_ptr<Model> model = factory(o);
    TS_CHECK(model != nullptr, "create_model: the factory of '", name, "' returned no model");
    model->to(options.device);
    return model;
  }
  if (is_path(name)) return build_with_options(load_model_file(name), options);
  std::string similar;
  const std::string family = name.substr(0, name.find('_'));
  for (const std::string& n : model_names())
    if (n.rfind(family, 0) == 0 && similar.size() < 200) similar += (similar.empty() ? "" : ", ") + n;
  throw Error("create_model: unknown model '" + name + "'" +
              (similar.empty() ? std::string(" (`tessera models` lists the names; a model file's name ends in .yaml)")
                               : "; similar: " + similar));
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ShippedModelFile& f : shipped_model_files()) names.emplace_back(f.name);
  for (std::string& n : registry().names()) names.push_back(std::move(n));
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tessera::models
