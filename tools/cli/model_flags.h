// The flags every model-building command shares (--model, --img-size, --num-classes, --in-chans,
// --patch-size, --drop, --drop-path, --layer-scale, --device) and the model they describe.
#pragma once
#include <memory>
#include <optional>

#include "tessera/core/autocast.h"
#include "tessera/io/torch_checkpoint.h"
#include "tessera/models/model.h"
#include "tools/cli/args.h"
#include "tools/cli/config_file.h"

namespace tessera::cli {

void add_model_options(ArgParser& p, const std::string& default_num_classes = "1000");
// The config keys (-c FILE, args.yaml) of those flags, with their types.
std::vector<ConfigKey> model_config_keys();
models::ModelOptions model_options(const ArgParser& p);
// create_model(--model, model_options(p)); the image size actually used (the variant's default
// when --img-size is not given) goes to *img_size.
std::shared_ptr<models::Model> build_model(const ArgParser& p, int64_t* img_size = nullptr);

// Builds --model for a weights file: the number of classes (when --num-classes is 0) and the input
// channels (when --in-chans is not given) are read from the weights' head and patch embedding,
// the resolution is img_size (0: --img-size or the variant's), and the weights are loaded with
// Model::load_weights (official names mapped to timm's, a learned position table resampled). The
// file is a .safetensors or a PyTorch checkpoint (io/weights_file.h). Errors name the file.
std::shared_ptr<models::Model> build_model_with_weights(const ArgParser& p, const std::string& weights_path,
                                                        int64_t img_size = 0, const TorchCheckpointOptions& torch = {});

// --amp [DTYPE], --amp-dtype, --tf32: the precision of a run on cuda (core/autocast.h). `--amp bf16`
// and timm's `--amp --amp-dtype bfloat16` mean the same; a bare --amp is float16, as in timm.
struct Precision {
  std::optional<DType> amp;
  AmpActivations activations = AmpActivations::Low;
  bool tf32 = false;
  bool deterministic = false;
};
void add_precision_options(ArgParser& p);
std::vector<ConfigKey> precision_config_keys();
Precision precision_options(const ArgParser& p);
// Sets the process-wide switches (TF32, activation precision, deterministic algorithms) of commands
// that do not train.
void apply_precision(const Precision& precision);

// --grad-checkpointing (timm's train.py flag), for the commands that train: Model::grad_checkpointing.
void add_grad_checkpointing_option(ArgParser& p);
ConfigKey grad_checkpointing_config_key();

// --cuda-graph, for the commands that run training steps on cuda: each step recorded once as a
// CUDA Graph and replayed (train/step_graph.h); off by default until a GPU has measured it.
void add_cuda_graph_option(ArgParser& p);
ConfigKey cuda_graph_config_key();

// --threads N, for every command that computes: the CPU threads of the ops (0: all cores).
void add_threads_option(ArgParser& p);
void apply_threads_option(const ArgParser& p);

}  // namespace tessera::cli
