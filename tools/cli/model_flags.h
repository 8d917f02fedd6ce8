// The flags every model-building command shares (--model, --img-size, --num-classes, --in-chans,
// --patch-size, --drop, --drop-path, --layer-scale) and the model they describe.
#pragma once
#include <memory>

#include "models/model.h"
#include "tools/cli/args.h"

namespace tessera::cli {

void add_model_options(ArgParser& p, const std::string& default_num_classes = "1000");
models::ModelOptions model_options(const ArgParser& p);
// create_model(--model, model_options(p)); the image size actually used (the variant's default
// when --img-size is not given) goes to *img_size.
std::shared_ptr<models::Model> build_model(const ArgParser& p, int64_t* img_size = nullptr);

}  // namespace tessera::cli
