// CIFAR-10 / CIFAR-100 "binary version" (cs.toronto.edu/~kriz/cifar.html). A file is a sequence
// of fixed-size records: CIFAR-10 = 1 label byte + 3072 pixel bytes (3073), CIFAR-100 = coarse
// label byte + fine label byte + 3072 pixel bytes (3074; we use the fine label). The pixels are
// planar 32x32 R, then G, then B, each row-major. Files: data_batch_1..5.bin / test_batch.bin
// (class names in batches.meta.txt), train.bin / test.bin (fine_label_names.txt). All records are
// read into memory when the dataset is opened (150 MB for CIFAR-10's training set).
#include <algorithm>
#include <filesystem>
#include <sstream>

#include "tessera/data/dataset.h"

namespace tessera::data {

namespace fs = std::filesystem;

const std::vector<std::string>& cifar10_classes() {
  static const std::vector<std::string> names{"airplane", "automobile", "bird",  "cat",  "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};
  return names;
}

namespace {

constexpr int64_t kSide = 32, kPixels = 3 * kSide * kSide;

struct Layout {
  int num_classes;
  int64_t label_bytes;  // 1 (CIFAR-10) or 2 (CIFAR-100: coarse, fine)
  int64_t record() const { return label_bytes + kPixels; }
};

// The folder holding the batches: root itself, or the folder the archive unpacks to.
fs::path batch_dir(const std::string& root, const Layout& layout, const std::string& first_file) {
  if (!fs::is_directory(root))
    throw DataError("open_dataset: dataset folder " + root + " does not exist or is not a folder");
  const fs::path sub = fs::path(root) / (layout.num_classes == 10 ? "cifar-10-batches-bin" : "cifar-100-binary");
  return fs::is_regular_file(fs::path(root) / first_file) || !fs::is_directory(sub) ? fs::path(root) : sub;
}

// One name per non-empty line; an absent file gives `fallback`.
std::vector<std::string> read_class_names(const fs::path& file, size_t expected, std::vector<std::string> fallback) {
  if (!fs::is_regular_file(file)) return fallback;
  std::vector<std::string> names;
  std::istringstream text(read_file_bytes(file.string()));
  for (std::string line; std::getline(text, line);) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string::npos) names.push_back(line.substr(first, line.find_last_not_of(" \t\r") - first + 1));
  }
  if (names.size() != expected)
    throw DataError(
        detail::concat("open_dataset: ", file.string(), " has ", names.size(), " class names, expected ", expected));
  return names;
}

class CifarDataset : public Dataset {
 public:
  CifarDataset(Layout layout, std::vector<std::string> files, std::vector<int64_t> file_start, std::string records,
               std::vector<std::string> classes, int64_t want)
      : layout_(layout),
        files_(std::move(files)),
        file_start_(std::move(file_start)),
        records_(std::move(records)),
        classes_(std::move(classes)),
        want_(want) {}

  int64_t size() const override { return file_start_.back(); }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe(int64_t index) const override {
    const size_t f = std::upper_bound(file_start_.begin(), file_start_.end(), index) - file_start_.begin() - 1;
    return files_[f] + "[" + std::to_string(index - file_start_[f]) + "]";
  }
  int64_t label(int64_t index) const override {
    check_index(index, "cifar");
    return record(index)[layout_.label_bytes - 1];
  }
  Sample get(int64_t index) const override {
    check_index(index, "cifar");
    const uint8_t* rec = record(index);
    const uint8_t* planes = rec + layout_.label_bytes;
    Image img(kSide, kSide, 3);
    for (int64_t p = 0; p < kSide * kSide; ++p)
      for (int64_t c = 0; c < 3; ++c) img.pixels[3 * p + c] = planes[c * kSide * kSide + p];
    return {convert_channels(std::move(img), want_, describe(index)), rec[layout_.label_bytes - 1]};
  }

 private:
  const uint8_t* record(int64_t index) const {
    return reinterpret_cast<const uint8_t*>(records_.data()) + index * layout_.record();
  }
  Layout layout_;
  std::vector<std::string> files_;
  std::vector<int64_t> file_start_;  // index of each file's first record, then the total
  std::string records_;
  std::vector<std::string> classes_;
  int64_t want_;
};

}  // namespace

std::shared_ptr<Dataset> open_cifar_dataset(const std::string& root, bool train, int num_classes,
                                            int64_t want_channels) {
  TS_CHECK(num_classes == 10 || num_classes == 100, "open_dataset: CIFAR has 10 or 100 classes, got ", num_classes);
  const Layout layout{num_classes, num_classes == 10 ? 1 : 2};
  std::vector<std::string> names;
  if (num_classes == 10 && train)
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  else if (num_classes == 10) names.push_back("test_batch.bin");
  else names.push_back(train ? "train.bin" : "test.bin");
  const fs::path dir = batch_dir(root, layout, names[0]);

  std::vector<std::string> files;
  std::vector<int64_t> file_start{0};
  std::string records;
  for (const auto& name : names) {
    const std::string path = (dir / name).string();
    if (!fs::is_regular_file(path))
      throw DataError("open_dataset: CIFAR-" + std::to_string(num_classes) + " file " + path +
                      " not found (the binary version from cs.toronto.edu/~kriz/cifar.html)");
    std::string bytes = read_file_bytes(path);
    if (bytes.empty() || bytes.size() % layout.record() != 0)
      throw DataError(detail::concat("open_dataset: ", path, " has ", bytes.size(),
                                     " bytes, not a positive multiple of the CIFAR-", num_classes, " record size ",
                                     layout.record(), " (", layout.label_bytes, " label byte(s) + 3072 pixels)"));
    for (size_t at = layout.label_bytes - 1; at < bytes.size(); at += layout.record()) {
      const int label = static_cast<uint8_t>(bytes[at]);
      if (label >= num_classes)
        throw DataError(detail::concat("open_dataset: ", path, ": record ", at / layout.record(), " has label ", label,
                                       ", expected [0, ", num_classes, ")"));
    }
    records += bytes;
    files.push_back(path);
    file_start.push_back(file_start.back() + static_cast<int64_t>(bytes.size()) / layout.record());
  }

  std::vector<std::string> fallback;
  if (num_classes == 10) fallback = cifar10_classes();
  for (int c = 0; num_classes == 100 && c < 100; ++c) fallback.push_back(std::to_string(c));
  std::vector<std::string> classes =
      read_class_names(dir / (num_classes == 10 ? "batches.meta.txt" : "fine_label_names.txt"), num_classes, fallback);
  return std::make_shared<CifarDataset>(layout, std::move(files), std::move(file_start), std::move(records),
                                        std::move(classes), want_channels);
}

}  // namespace tessera::data
