// Datasets: indexable collections of (image, label) samples, and the timm-like factory that opens
// one by name. Formats (see docs in each .cpp):
//   ImageFolder    root/<class>/**/<image>  classes = sorted sub-folder names (torchvision order)
//                                           (data/image_folder.cpp)
//   MNIST IDX      {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]   (data/idx_dataset.cpp)
//   CIFAR binary   data_batch_{1..5}.bin / test_batch.bin, or train.bin / test.bin for CIFAR-100
//                                           (data/cifar_dataset.cpp)
// Every problem that can be found by looking at the files without decoding them (missing folder,
// no classes, a class without images, bad IDX header, CIFAR size) is an error when the dataset is
// opened, before any training work starts; a single unreadable image is a DataError from get(),
// which the loader skips or reports (data/loader.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/data/decode.h"
#include "tessera/data/encoded_image.h"
#include "tessera/data/image.h"

namespace tessera::data {

struct Sample {
  Image image;
  int64_t label = -1;
};

// A sample whose image is decoded on demand (data/encoded_image.h).
struct EncodedSample {
  EncodedImage image;
  int64_t label = -1;
};

class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  // Thread-safe. Throws DataError (naming describe(index)) when the item cannot be read, and
  // tessera::Error when index is out of [0, size()).
  virtual Sample get(int64_t index) const = 0;
  // The sample with its image not decoded yet, for transforms that decode only the pixels they
  // need; the same errors as get(), some of them only when the image is decoded. The default
  // decodes with get(); an image folder reads a JPEG's header and keeps its bytes.
  virtual EncodedSample get_encoded(int64_t index) const;
  virtual const std::vector<std::string>& classes() const = 0;
  // What messages call the item: its file path, or "file.idx[123]".
  virtual std::string describe(int64_t index) const = 0;
  // Label without decoding the image (class-balanced sampling, statistics). The default decodes.
  virtual int64_t label(int64_t index) const { return get(index).label; }

 protected:
  // Throws tessera::Error naming the dataset when index is out of range.
  void check_index(int64_t index, const char* dataset_name) const;
};

// Opens a dataset the way timm's create_dataset does:
//   name "", "folder", "imagefolder"         ImageFolder at root/<split> if that folder exists
//                                            (for "val" also root/validation), else root itself
//   "mnist", "fashion_mnist" (also "fashion-mnist", "fashionmnist", "torch/<name>")
//                                            IDX files in root (or root/raw, root/<MNIST|FashionMNIST>/raw);
//                                            an empty root means /usr/share/datasets/fashion-mnist
//                                            for Fashion-MNIST (Debian's dataset-fashion-mnist)
//   "cifar10", "cifar100" (also "torch/cifar10", ...)
//                                            binary batches in root or root/cifar-10-batches-bin
//                                            (root/cifar-100-binary)
// split: "train", or "val" / "validation" / "test" (the test files of IDX and CIFAR).
// want_channels: the model's input channels, 1 or 3; images are converted on the fly.
std::shared_ptr<Dataset> open_dataset(const std::string& name, const std::string& root, const std::string& split,
                                      int64_t want_channels);

// What a data directory holds, for a --data-dir given without --dataset (timm's train.py reads
// such a folder as an ImageFolder): "fashion_mnist" or "mnist" where IDX files are (as open_dataset
// looks for them; Fashion-MNIST when torchvision's FashionMNIST/raw layout or a folder name says
// so), "cifar10" / "cifar100" where their binary batches are, and "folder" otherwise. `reason`
// says which files decided, for the run's first log line. Throws DataError when root is no folder.
struct DetectedDataset {
  std::string name, reason;
};
DetectedDataset detect_dataset(const std::string& root);

// The format-specific openers behind open_dataset (same errors). `train` selects the training
// files of IDX and CIFAR.
std::shared_ptr<Dataset> open_image_folder(const std::string& dir, int64_t want_channels);
std::shared_ptr<Dataset> open_idx_dataset(const std::string& root, bool train, bool fashion, int64_t want_channels);
std::shared_ptr<Dataset> open_cifar_dataset(const std::string& root, bool train, int num_classes,
                                            int64_t want_channels);

// Class names of the standard datasets.
const std::vector<std::string>& fashion_mnist_classes();
const std::vector<std::string>& cifar10_classes();

// The default location of Debian's dataset-fashion-mnist package.
inline constexpr const char* kFashionMnistDefaultRoot = "/usr/share/datasets/fashion-mnist";

}  // namespace tessera::data
