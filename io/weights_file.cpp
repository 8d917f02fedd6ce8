#include "tessera/io/weights_file.h"

#include "tessera/io/safetensors.h"
#include "tessera/io/zip_archive.h"

namespace tessera {

nn::NamedTensors load_weights_file(const std::string& path, const TorchCheckpointOptions& torch_options) {
  // A torch.save archive begins "PK"; so does no safetensors file (its first 8 bytes are a length
  // below 100 MB). A legacy torch pickle is told apart and refused by load_torch_checkpoint.
  if (looks_like_zip(path) || is_torch_checkpoint_path(path)) return load_torch_checkpoint(path, torch_options);
  return load_safetensors(path);
}

}  // namespace tessera
