// The Dataset base class and open_dataset, the name -> format factory (see dataset.h).
#include "tessera/data/dataset.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <initializer_list>
#include <utility>

namespace tessera::data {

namespace fs = std::filesystem;

Dataset::~Dataset() = default;

EncodedSample Dataset::get_encoded(int64_t index) const {
  Sample s = get(index);
  return {EncodedImage(std::move(s.image)), s.label};
}

void Dataset::check_index(int64_t index, const char* dataset_name) const {
  TS_CHECK(index >= 0 && index < size(), dataset_name, ": index ", index, " out of range [0, ", size(), ")");
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "torch/Fashion-MNIST" -> "fashion_mnist": timm's "torch/" prefix selects torchvision's reader
// for the same files, and users spell the names with '-' or '_'.
std::string normalise_name(const std::string& name) {
  std::string n = lower(name);
  if (n.rfind("torch/", 0) == 0) n = n.substr(6);
  std::replace(n.begin(), n.end(), '-', '_');
  if (n == "fashionmnist") n = "fashion_mnist";
  if (n == "image_folder") n = "imagefolder";
  return n;
}

bool is_val_split(const std::string& split) {
  return split == "val" || split == "validation" || split == "test" || split == "eval";
}

// IDX and CIFAR have exactly two parts: the training files and the test files.
bool train_split(const std::string& split, const std::string& dataset) {
  const std::string s = lower(split);
  if (s == "train") return true;
  TS_CHECK(is_val_split(s), "open_dataset: ", dataset,
           " has a train and a test split; expected split \"train\" or \"val\"/\"test\", got \"", split, "\"");
  return false;
}

// timm's _search_split: root/<split> if it is a folder, else the root itself. Falling back to the
// root when the root has a train/ folder but not the requested split would silently make "train"
// a class of the validation set, so that is an error.
std::string folder_for_split(const std::string& root, const std::string& split) {
  if (!fs::is_directory(root))
    throw DataError("open_dataset: dataset folder " + root + " does not exist or is not a folder");
  if (split.empty()) return root;
  std::vector<std::string> candidates{split};
  if (lower(split) == "val") candidates.push_back("validation");
  if (lower(split) == "validation") candidates.push_back("val");
  for (const auto& c : candidates)
    if (fs::is_directory(fs::path(root) / c)) return (fs::path(root) / c).string();
  if (split != "train" && fs::is_directory(fs::path(root) / "train"))
    throw DataError("open_dataset: " + root + " has a train/ folder but no " + split + "/ folder for the \"" + split +
                    "\" split");
  return root;
}

// The first of `names` that is a file in one of `dirs` (relative to root), or "".
std::string first_file(const fs::path& root, std::initializer_list<const char*> dirs,
                       std::initializer_list<const char*> names) {
  for (const char* d : dirs)
    for (const char* n : names)
      if (fs::is_regular_file(root / d / n)) return (fs::path(d) / n).lexically_normal().string();
  return "";
}

}  // namespace

DetectedDataset detect_dataset(const std::string& root) {
  if (!fs::is_directory(root))
    throw DataError("open_dataset: dataset folder " + root + " does not exist or is not a folder");
  const fs::path r(root);
  const std::string idx = first_file(r, {".", "raw", "FashionMNIST/raw", "MNIST/raw"},
                                     {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"});
  if (!idx.empty()) {
    // The files of MNIST and Fashion-MNIST have the same names; their folders tell them apart.
    const bool fashion = idx.rfind("FashionMNIST/", 0) == 0 ||
                         (idx.rfind("MNIST/", 0) != 0 &&
                          lower(fs::absolute(r).lexically_normal().string()).find("fashion") != std::string::npos);
    return {fashion ? "fashion_mnist" : "mnist",
            "it holds " + idx + (fashion ? " under a Fashion-MNIST folder name" : "")};
  }
  const std::string cifar10 = first_file(r, {".", "cifar-10-batches-bin"}, {"data_batch_1.bin"});
  if (!cifar10.empty()) return {"cifar10", "it holds " + cifar10};
  const std::string cifar100 = first_file(r, {".", "cifar-100-binary"}, {"train.bin"});
  if (!cifar100.empty()) return {"cifar100", "it holds " + cifar100};
  return {"folder", "it holds no IDX or CIFAR files: an image folder, one subfolder per class, as timm reads it"};
}

std::shared_ptr<Dataset> open_dataset(const std::string& name, const std::string& root, const std::string& split,
                                      int64_t want_channels) {
  TS_CHECK(want_channels == 1 || want_channels == 3,
           "open_dataset: want_channels (the model's input channels) must be 1 or 3, got ", want_channels);
  const std::string n = normalise_name(name);
  if (n.empty() || n == "folder" || n == "imagefolder") {
    TS_CHECK(!root.empty(), "open_dataset: an image folder dataset needs a data directory");
    return open_image_folder(folder_for_split(root, split), want_channels);
  }
  if (n == "mnist" || n == "fashion_mnist") {
    const bool fashion = n == "fashion_mnist";
    TS_CHECK(!root.empty() || fashion, "open_dataset: mnist needs a data directory");
    return open_idx_dataset(root.empty() ? kFashionMnistDefaultRoot : root, train_split(split, n), fashion,
                            want_channels);
  }
  if (n == "cifar10" || n == "cifar100") {
    TS_CHECK(!root.empty(), "open_dataset: ", n, " needs a data directory");
    return open_cifar_dataset(root, train_split(split, n), n == "cifar10" ? 10 : 100, want_channels);
  }
  throw Error("open_dataset: unknown dataset \"" + name +
              "\"; expected \"\" / \"folder\" / \"imagefolder\" (an image folder), \"mnist\", "
              "\"fashion_mnist\", \"cifar10\" or \"cifar100\"");
}

}  // namespace tessera::data
