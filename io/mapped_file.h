// A file memory-mapped read-only, for the readers that copy tensors out of a file (safetensors,
// PyTorch's zip checkpoints): the file's bytes are addressable without reading them all, and the
// pages of a tensor already copied can be dropped from the resident set, so loading a model peaks
// near the model's size instead of twice it.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace tessera {

class MappedFile {
 public:
  // Maps `path`. Errors read "<reader>: '<path>': cannot open: ..." (or cannot read, is a
  // directory, not a regular file). An empty file maps to no bytes (data() null, size() 0).
  MappedFile(const std::string& path, const std::string& reader);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

  // Drops the mapped pages lying entirely inside [p, p + n) from this process's resident set once
  // their bytes have been copied. Harmless for correctness: the mapping is a private, never
  // written view of the file, so a later access faults the same bytes back in from the page cache.
  static void release_pages(const void* p, size_t n);

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera
