// Models by timm's names: create_model("xcit_tiny_12_p16_224", options). Programs add their own
// (register_model), which the trainer and the `tessera` commands then build by name like the rest.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/models/model.h"

namespace tessera::models {

// Builds a model (on the CPU; create_model moves it to options.device) from the options the user
// gave: num_classes, img_size, in_chans, drop rates and model_kwargs, which a factory should check.
using ModelFactory = std::function<std::shared_ptr<Model>(const ModelOptions&)>;

// Adds a model under `name`; a name already taken (the built-in ones included) is an error.
void register_model(const std::string& name, ModelFactory factory);

// Builds a registered model; an unknown name is an error that lists similar names.
std::shared_ptr<Model> create_model(const std::string& name, const ModelOptions& options = {});
// All registered names, sorted.
std::vector<std::string> model_names();

}  // namespace tessera::models
