// The flags every model-building command shares (--model, --img-size, --num-classes, --in-chans,
// --patch-size, --drop, --drop-path, --layer-scale, --device, --model-kwargs), as rows of an option
// table (option_table.h) bound to models::ModelOptions, and the model they describe.
#pragma once
#include <memory>
#include <vector>

#include "tessera/io/torch_checkpoint.h"
#include "tessera/models/model.h"
#include "tools/cli/args.h"
#include "tools/cli/config_file.h"
#include "tools/cli/option_table.h"

namespace tessera::cli {

// The rows, in --help order; each bound row's default is its ModelOptions member's.
const std::vector<OptionRow<models::ModelOptions>>& model_option_table();
// The defaults of the commands that read the number of classes from the weights they load (train:
// from its dataset) unless --num-classes is given: ModelOptions' with num_classes 0.
models::ModelOptions classes_from_weights();
// Declares the flags, their defaults those of `defaults`; a --num-classes default of 0 is explained
// in its help.
void add_model_options(ArgParser& p, const models::ModelOptions& defaults = {});
// The config keys (-c FILE, args.yaml) of those flags, with their types.
std::vector<ConfigKey> model_config_keys();
// The ModelOptions the parsed flags give. For a model file, --num-classes and --in-chans not given
// are 0, which keeps the file's values; a name gets ModelOptions' (timm's 1000 and 3) as before.
models::ModelOptions model_options(const ArgParser& p);
// The model file recorded in a checkpoint's metadata (train/checkpoint.h), "" when none.
std::string recorded_model_file(const std::string& weights_path);
// create_model(--model, o): a name or a model file; without --model, the model file that
// `weights_path` records (a checkpoint of `tessera train`). Neither: a UsageError that says so.
std::shared_ptr<models::Model> create_model_from_flags(const ArgParser& p, const models::ModelOptions& o,
                                                       const std::string& weights_path = "");
// What messages and JSON call the model: --model, else the recorded file's name.
std::string model_label(const ArgParser& p, const std::string& weights_path = "");
// create_model_from_flags(p, model_options(p)); the image size actually used (the variant's
// default when --img-size is not given) goes to *img_size.
std::shared_ptr<models::Model> build_model(const ArgParser& p, int64_t* img_size = nullptr);

// Builds --model (or, without it, the model file the weights record) for a weights file: the number of classes (when --num-classes is 0) and the input
// channels (when --in-chans is not given) are read from the weights' head and patch embedding,
// the resolution is img_size (0: --img-size or the variant's), and the weights are loaded with
// Model::load_weights (official names mapped to timm's, a learned position table resampled). The
// file is a .safetensors or a PyTorch checkpoint (io/weights_file.h). Errors name the file.
std::shared_ptr<models::Model> build_model_with_weights(const ArgParser& p, const std::string& weights_path,
                                                        int64_t img_size = 0, const TorchCheckpointOptions& torch = {});

// --threads N, for every command that computes: the CPU threads of the ops (0: all cores). The
// commands set the threads themselves, so the row sets no member; train's table holds it too, with
// train's way of reading it as `consumer`.
template <class Options>
OptionRow<Options> threads_row(std::string consumer) {
  return unbound<Options>("--threads", "N", "compute threads (0: all cores)", std::move(consumer), ConfigType::Int,
                          "0");
}
void add_threads_option(ArgParser& p);
void apply_threads_option(const ArgParser& p);

}  // namespace tessera::cli
