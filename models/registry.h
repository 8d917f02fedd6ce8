// Models by timm's names: create_model("xcit_tiny_12_p16_224", options).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace tessera::models {

// Builds a registered model; an unknown name is an error that lists similar names.
std::shared_ptr<Model> create_model(const std::string& name, const ModelOptions& options = {});
// All registered names, sorted.
std::vector<std::string> model_names();

}  // namespace tessera::models
