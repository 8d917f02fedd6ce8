// One entry point for the weight files a user brings: timm's safetensors, or a PyTorch checkpoint
// (the papers' official .pth files, timm's older pytorch_model.bin; io/torch_checkpoint.h), told
// apart by their first bytes, not their names.
#pragma once
#include <string>

#include "tessera/io/torch_checkpoint.h"
#include "tessera/nn/module.h"

namespace tessera {

nn::NamedTensors load_weights_file(const std::string& path, const TorchCheckpointOptions& torch_options = {});

}  // namespace tessera
