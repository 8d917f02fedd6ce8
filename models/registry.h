// Models by timm's names or from model files: create_model("xcit_tiny_12_p16_224", options), or
// create_model("my_hybrid.yaml", options). The named variants are model files shipped with the
// library (models/files/, models/model_file.h) and built by the one builder (models/builder.h).
// Programs add their own models (register_model), which the trainer and the `tessera` commands
// then build by name like the rest.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/models/model.h"

namespace tessera::models {

// Builds a model (on the CPU; create_model moves it to options.device) from the options the user
// gave: num_classes, img_size, in_chans, drop rates and model_kwargs, which a factory should check.
// A factory sees num_classes 1000 and in_chans 3 where the options say 0.
using ModelFactory = std::function<std::shared_ptr<Model>(const ModelOptions&)>;

// Adds a model under `name`; a name already taken (the built-in ones included) is an error.
void register_model(const std::string& name, ModelFactory factory);

// Builds a registered or shipped model by name, or the model file at a path (a name ending in
// .yaml or .yml, or holding a '/'). An unknown name is an error that lists similar names.
std::shared_ptr<Model> create_model(const std::string& name_or_file, const ModelOptions& options = {});
// Builds a model from a model file's text; `source` names it in messages (a run folder's recorded
// file, say). create_model_from_text(model->model_file(), source, file_values()) rebuilds `model`.
std::shared_ptr<Model> create_model_from_text(const std::string& text, const std::string& source,
                                              const ModelOptions& options = {});
// Whether create_model reads `name_or_file` as a model file's path: it ends in .yaml or .yml, or
// holds a '/' (a shipped or registered name never does).
bool is_model_path(const std::string& name_or_file);
// All names: the shipped variants and the registered models, sorted.
std::vector<std::string> model_names();

}  // namespace tessera::models
