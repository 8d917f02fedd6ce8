// PyTorch checkpoints (torch.save's zip archives: the papers' official .pth files, timm's older
// pytorch_model.bin) read without Python and without running anything in them: the archive by
// io/zip_archive.h, its data.pkl by the restricted interpreter of io/torch_pickle.h, each tensor
// copied out of data/<key> with its offset and strides checked against the storage.
//
// The file may hold a bare state dict or wrap it as timm's load_checkpoint expects:
// {"state_dict": ...}, {"model": ...} (XCiT's, DeiT/CaiT's and CoaT's official files) or
// {"model_ema": ...} / {"state_dict_ema": ...}; other entries beside it (epoch, optimizer) are
// read and ignored if they are plain values, and refused if they name anything else. A "module."
// prefix on every key (a model saved inside DistributedDataParallel) is dropped, as timm does.
// Pickles of PyTorch before 1.6 (not zip archives) are refused with a message saying how to
// re-save them.
#pragma once
#include <string>

#include "tessera/nn/module.h"

namespace tessera {

struct TorchCheckpointOptions {
  bool use_ema = false;  // take "model_ema" / "state_dict_ema" rather than the model's weights
};

nn::NamedTensors load_torch_checkpoint(const std::string& path, const TorchCheckpointOptions& options = {});

// True for a path whose extension PyTorch checkpoints use: .pth, .pt, .bin, .ckpt.
bool is_torch_checkpoint_path(const std::string& path);

}  // namespace tessera
