// The one builder: a model spec (models/model_spec.h, read from a model file or written in code)
// and the ModelOptions a user gives -> a model. Every named variant is built here from its shipped
// file (models/files/), and so is every hybrid.
#pragma once
#include <memory>

#include "tessera/models/model.h"
#include "tessera/models/model_spec.h"

namespace tessera::models {

// Changes `spec` as `options` say (model.h: 0 keeps the file's value; model_kwargs by timm's
// names), recording each key changed so that a check's message can say ModelOptions set it. An
// unknown or out-of-range model kwarg is an error that lists the ones this model takes.
void apply_options(ModelSpec& spec, const ModelOptions& options);

// Checks `spec` and builds it on the CPU. A spec that a family's config states exactly is built as
// that family's class (Xcit, Cait, Coat, UfoVit: the same model, with typed handles to its parts);
// any other as a VisionTransformer. Model::model_file() gives the spec back as a file.
std::shared_ptr<Model> build_model(const ModelSpec& spec);

}  // namespace tessera::models
