// MNIST / Fashion-MNIST in LeCun's IDX format (yann.lecun.com/exdb/mnist): a big-endian header
// `00 00 <type> <ndims>` followed by ndims uint32 sizes and the C-order data. The images file is
// type 0x08 (unsigned byte) with 3 dims [N, H, W] (magic 0x00000803), the labels file type 0x08
// with 1 dim [N] (0x00000801). Both files are read whole into memory once (60000 x 784 bytes is
// 47 MB), through zlib's gzread, which also reads files that are not gzipped.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "tessera/data/dataset.h"

namespace tessera::data {

namespace fs = std::filesystem;

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

namespace {

constexpr int kIdxUnsignedByte = 0x08;

struct IdxArray {
  std::string path;
  std::vector<int64_t> dims;
  std::string bytes;  // the whole file; the data starts at data_offset
  size_t data_offset = 0;
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(bytes.data()) + data_offset; }
};

// An IDX file opened through zlib, which reads plain files too (gzdirect).
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    if (!f_) throw DataError("open_dataset: cannot open " + path);
    gzbuffer(f_, 1 << 18);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  ~GzFile() { gzclose(f_); }

  // Appends up to n bytes to out; returns how many there were (fewer only at the end of the data).
  // Through one uninitialized buffer per file: a small file whose header claims gigabytes costs one
  // short read, not a zero-filled megabyte per call (found by fuzz/fuzz_idx: page faults and memset
  // were most of its time).
  size_t read(std::string& out, size_t n) {
    size_t total = 0;
    while (total < n) {
      const int got = gzread(f_, chunk_.get(), static_cast<unsigned>(std::min(n - total, kChunkBytes)));
      if (got < 0) {
        int err = Z_OK;
        const char* msg = gzerror(f_, &err);
        throw DataError("open_dataset: " + path_ + ": cannot decompress (zlib: " + msg + ")");
      }
      if (got == 0) break;
      out.append(chunk_.get(), static_cast<size_t>(got));
      total += static_cast<size_t>(got);
    }
    return total;
  }

 private:
  static constexpr size_t kChunkBytes = size_t{1} << 16;
  std::string path_;
  gzFile f_;
  std::unique_ptr<char[]> chunk_{new char[kChunkBytes]};
};

std::string magic_hex(uint32_t m) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", m);
  return buf;
}

uint32_t read_be32(const std::string& b, size_t at) {
  const auto* p = reinterpret_cast<const uint8_t*>(b.data()) + at;
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads and validates an IDX file of unsigned bytes with `ndims` dimensions; `what` is "images" or
// "labels" for the messages. The header's claim is read first, and the data are read only up to
// it (and one byte more, to find trailing data): a small file that claims gigabytes costs what the
// file holds, and so does a gzip bomb.
IdxArray read_idx(const std::string& path, int ndims, const char* what) {
  IdxArray a;
  a.path = path;
  GzFile file(path);
  const uint32_t expected = (kIdxUnsignedByte << 8) | ndims;
  if (file.read(a.bytes, 4) < 4 || read_be32(a.bytes, 0) != expected)
    throw DataError("open_dataset: " + path + ": not an IDX " + what + " file: magic " +
                    (a.bytes.size() < 4 ? "missing" : magic_hex(read_be32(a.bytes, 0))) + ", expected " +
                    magic_hex(expected) + " (unsigned bytes, " + std::to_string(ndims) + " dims)");
  a.data_offset = 4 + 4 * static_cast<size_t>(ndims);
  if (file.read(a.bytes, a.data_offset - 4) < a.data_offset - 4)
    throw DataError(detail::concat("open_dataset: ", path, ": truncated: the IDX header needs ", a.data_offset,
                                   " bytes, the file has ", a.bytes.size()));
  uint64_t count = 1;
  bool overflow = false;
  for (int d = 0; d < ndims; ++d) {
    a.dims.push_back(read_be32(a.bytes, 4 + 4 * d));
    overflow |= __builtin_mul_overflow(count, static_cast<uint64_t>(a.dims.back()), &count);
  }
  if (overflow || count > static_cast<uint64_t>(INT64_MAX) - 1)
    throw DataError(detail::concat("open_dataset: ", path, ": IDX header claims ", what, " ", a.dims,
                                   ", more than 2^63 bytes of data"));
  const size_t present = file.read(a.bytes, count + 1);
  if (present < count)
    throw DataError(detail::concat("open_dataset: ", path, ": truncated: the IDX header claims ", what, " ", a.dims,
                                   " = ", count, " bytes of data, the file has ", present));
  if (present > count)
    throw DataError(detail::concat("open_dataset: ", path, ": the IDX header claims ", what, " ", a.dims, " = ", count,
                                   " bytes of data, but more follow (trailing bytes)"));
  return a;
}

// The file named `base` (or base.gz) in root or in torchvision's download layout.
std::string find_idx_file(const std::string& root, const std::string& base, bool fashion) {
  if (!fs::is_directory(root))
    throw DataError("open_dataset: dataset folder " + root + " does not exist or is not a folder");
  const fs::path r(root);
  const std::vector<fs::path> dirs{r, r / "raw", r / (fashion ? "FashionMNIST" : "MNIST") / "raw"};
  for (const auto& d : dirs)
    for (const char* ext : {"", ".gz"})
      if (fs::is_regular_file(d / (base + ext))) return (d / (base + ext)).string();
  throw DataError("open_dataset: no " + base + " or " + base + ".gz in " + root + " (also looked in its raw/ and " +
                  (fashion ? "FashionMNIST" : "MNIST") + "/raw/ folders)");
}

class IdxDataset : public Dataset {
 public:
  IdxDataset(IdxArray images, IdxArray labels, std::vector<std::string> classes, int64_t want)
      : images_(std::move(images)), labels_(std::move(labels)), classes_(std::move(classes)), want_(want) {}

  int64_t size() const override { return images_.dims[0]; }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe(int64_t index) const override { return images_.path + "[" + std::to_string(index) + "]"; }
  int64_t label(int64_t index) const override {
    check_index(index, "mnist");
    return labels_.data()[index];
  }
  Sample get(int64_t index) const override {
    check_index(index, "mnist");
    const int64_t h = images_.dims[1], w = images_.dims[2];
    Image img(h, w, 1);
    std::copy_n(images_.data() + index * h * w, h * w, img.pixels.data());
    return {convert_channels(std::move(img), want_, describe(index)), labels_.data()[index]};
  }

 private:
  IdxArray images_, labels_;
  std::vector<std::string> classes_;
  int64_t want_;
};

}  // namespace

std::shared_ptr<Dataset> open_idx_dataset(const std::string& root, bool train, bool fashion, int64_t want_channels) {
  const std::string prefix = train ? "train" : "t10k";
  IdxArray images = read_idx(find_idx_file(root, prefix + "-images-idx3-ubyte", fashion), 3, "images");
  IdxArray labels = read_idx(find_idx_file(root, prefix + "-labels-idx1-ubyte", fashion), 1, "labels");
  if (images.dims[0] != labels.dims[0])
    throw DataError(detail::concat("open_dataset: ", images.path, " has ", images.dims[0], " images but ", labels.path,
                                   " has ", labels.dims[0], " labels"));
  if (images.dims[0] == 0) throw DataError("open_dataset: " + images.path + " holds no images");
  if (images.dims[1] == 0 || images.dims[2] == 0)
    throw DataError(detail::concat("open_dataset: ", images.path, ": images of ", images.dims[1], "x", images.dims[2],
                                   " pixels (the IDX header's sizes must be positive)"));
  std::vector<std::string> classes = fashion ? fashion_mnist_classes() : std::vector<std::string>{};
  for (int c = 0; !fashion && c < 10; ++c) classes.push_back(std::to_string(c));
  for (int64_t i = 0; i < labels.dims[0]; ++i)
    if (labels.data()[i] >= classes.size())
      throw DataError(detail::concat("open_dataset: ", labels.path, ": label ", int{labels.data()[i]}, " of item ", i,
                                     " is not a class index in [0, ", classes.size(), ")"));
  return std::make_shared<IdxDataset>(std::move(images), std::move(labels), std::move(classes), want_channels);
}

}  // namespace tessera::data
