// Reading and writing safetensors files, the weight format of Hugging Face / timm
// (`model.safetensors`, written by `safetensors.torch.save_file`).
//
// Layout (huggingface/safetensors README, "Format"):
//   [8 bytes]  N, unsigned 64-bit little-endian: the header length
//   [N bytes]  UTF-8 JSON object  {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
//              ..., "__metadata__": {"<key>": "<value>"}}  (metadata optional, string -> string),
//              possibly padded with spaces
//   [rest]     the data buffer: raw little-endian, row-major, contiguous tensors; tensor bytes are
//              [b, e) relative to the start of this buffer.
//
// Validation follows the reference implementation, so a file opens here exactly when the Python
// library would open it: header length at most 100,000,000 and inside the file, valid UTF-8 JSON,
// every entry complete with a known dtype, e - b == numel(shape) * element size (with overflow
// checks), and the tensors, sorted by offset, tile the data buffer from 0 to its end with no hole,
// overlap or trailing byte. Any violation throws tessera::Error naming the file, the tensor key
// and what was expected.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

class MappedFile;

// One tensor entry of a safetensors header.
struct SafetensorsTensorInfo {
  std::string dtype_name;      // as stored: "F32", "BF16", "I64", "BOOL", "I32", "F8_E4M3", ...
  std::optional<DType> dtype;  // F32/F64/F16/BF16/I64/BOOL; nullopt for dtypes Tessera cannot hold
  Shape shape;
  uint64_t data_begin = 0;  // byte range [data_begin, data_end) in the data buffer
  uint64_t data_end = 0;
};

// A safetensors file opened for reading: the file is memory-mapped read-only and its header fully
// validated when opened; tensor data are copied out one tensor at a time by load(), which then
// releases that tensor's mapped pages from the process's resident memory. Loading a whole model
// therefore peaks near the model's size (measured: a 1 GiB file, all tensors kept, 1.0 GiB peak
// RSS), and loading tensor by tensor near the largest tensor's size, twice.
// Copies share the mapping (it is unmapped when the last copy goes); const methods may be called
// from several threads at once. The mapping keeps the data readable after the file is renamed
// or deleted; truncating the file while it is open is not supported (the OS signals SIGBUS).
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);

  const std::string& path() const { return path_; }
  // Tensor names in the order of their data in the file (for files written by save_safetensors,
  // the order they were given in).
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Dtype, shape and byte range of one tensor, without touching its data. Throws for an unknown
  // name, listing some of the names the file has.
  const SafetensorsTensorInfo& info(const std::string& name) const;
  // A new contiguous CPU tensor of the stored dtype and shape holding a copy of the stored data.
  // Throws for an unknown name, a dtype Tessera has no DType for (I32, U8, F8_*, ...), and BOOL
  // bytes other than 0 and 1.
  Tensor load(const std::string& name) const;
  // The "__metadata__" map (empty if the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::shared_ptr<const MappedFile> mapping_;
  const unsigned char* data_ = nullptr;  // start of the data buffer inside the mapping
  std::vector<std::string> names_;
  std::vector<SafetensorsTensorInfo> infos_;  // parallel to names_
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Opens and validates `path` (see SafetensorsReader).
SafetensorsReader open_safetensors(const std::string& path);

// Every tensor of the file, in the order of SafetensorsReader::names().
std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path);

// Writes `tensors` (any dtype, strides or device; copied to the host and made contiguous one at a
// time) in the given order, with `metadata` as "__metadata__" (omitted when empty; the default
// {"format": "pt"} is what Hugging Face transformers expects). The header is compact JSON padded
// with spaces to a multiple of 8 bytes, so every tensor starts 8-byte aligned.
//
// Atomic (core/atomic_file.h): the bytes go to `path + ".tmp.<pid>"`, which is fsync'ed and
// renamed over `path`, so readers never see a half-written file and an existing file survives any failure (the temporary
// is removed). A symlink at `path` is replaced by the new file, not followed. Throws for undefined tensors, duplicate or reserved ("__metadata__") names, names
// or metadata that are not valid UTF-8, and I/O errors (naming the path and the system's reason).
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace tessera
