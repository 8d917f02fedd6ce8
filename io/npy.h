// NumPy .npy files (format versions 1.0-3.0, numpy/lib/format.py): the 6-byte magic "\x93NUMPY",
// a version, a little-endian header length, then a Python-dict header
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 224, 224), }
// padded with spaces to a 64-byte boundary, then the raw C-order data. The way Python users hand
// arrays to `tessera predict` and read its logits back.
#pragma once
#include <string>
#include <string_view>

#include "tessera/core/tensor.h"

namespace tessera::io {

// Reads float32 ('<f4'), float64 ('<f8') and int64 ('<i8') arrays in C order. Anything else
// (Fortran order, big-endian, other dtypes, a truncated file, a malformed header) is an error
// naming the file and what was expected. The size the header claims is compared with the bytes
// present before anything is allocated, and headers longer than numpy's limit (10,000 bytes) are
// refused.
Tensor read_npy(const std::string& path);
// The same from the file's bytes in memory; `path` is what the messages call them.
Tensor parse_npy(std::string_view bytes, const std::string& path);
// Writes a version 1.0 file of t's dtype (float32, float64 or int64), atomically
// (core/atomic_file.h).
void write_npy(const std::string& path, const Tensor& t);

}  // namespace tessera::io
