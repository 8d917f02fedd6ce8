// ImageFolder (torchvision.datasets.ImageFolder layout): dir/<class>/**/<image>. Classes are the
// sub-folders of dir sorted by name (byte order, as Python's sorted(); class index = position), the
// images of a class are all files below its folder, searched recursively through symlinks, with an
// image extension (case-insensitive), sorted by path. Names starting with '.' (hidden files and
// folders, macOS "._x.jpg" forks) are ignored. The extensions are torchvision's IMG_EXTENSIONS
// minus TIFF and WebP, which we cannot decode, plus the other formats stb_image reads; the format
// itself is sniffed from the bytes when decoding (decode.h).
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "tessera/data/dataset.h"
#include "tessera/data/stage_clock.h"

namespace tessera::data {

namespace fs = std::filesystem;

namespace {

const char* const kExtensions[] = {".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".pnm", ".gif", ".tga"};

bool hidden(const fs::path& p) { return p.filename().string().rfind('.', 0) == 0; }

bool has_image_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::find(std::begin(kExtensions), std::end(kExtensions), ext) != std::end(kExtensions);
}

std::string extension_list() {
  std::string s;
  for (const char* e : kExtensions) {
    if (!s.empty()) s += ' ';
    s += e;
  }
  return s;
}

// Image paths below class_dir (a folder of root), relative to root, sorted. One walk of the
// directories: the entry types come from readdir (a stat only where the file system gives none, or
// for a symlink), and the relative path is the walked path minus root's prefix (lexically_relative
// per file took about a third of the CPU time of opening 1.28M files).
std::vector<std::string> list_images(const fs::path& root, const fs::path& class_dir) {
  const size_t prefix = root.native().size() + (root.native().back() == '/' ? 0 : 1);  // "root/"
  std::vector<std::string> out;
  const auto options = fs::directory_options::follow_directory_symlink | fs::directory_options::skip_permission_denied;
  for (auto it = fs::recursive_directory_iterator(class_dir, options); it != fs::recursive_directory_iterator(); ++it) {
    if (hidden(it->path())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && has_image_extension(it->path())) out.push_back(it->path().native().substr(prefix));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The relative paths of 1.28M ImageNet files are packed into one buffer (about 40 MB instead of
// about 100 MB of std::string objects).
class ImageFolderDataset : public Dataset {
 public:
  ImageFolderDataset(std::string root, std::vector<std::string> classes, int64_t want)
      : root_(std::move(root)), classes_(std::move(classes)), want_(want) {}

  void add(const std::string& relative_path, int64_t label) {
    pool_ += relative_path;
    ends_.push_back(pool_.size());
    labels_.push_back(static_cast<int32_t>(label));
  }

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe(int64_t index) const override {
    check_index(index, "image folder");
    const size_t begin = index == 0 ? 0 : ends_[index - 1];
    return root_ + "/" + pool_.substr(begin, ends_[index] - begin);
  }
  int64_t label(int64_t index) const override {
    check_index(index, "image folder");
    return labels_[index];
  }
  Sample get(int64_t index) const override { return {decode_image(describe(index), want_), label(index)}; }
  EncodedSample get_encoded(int64_t index) const override {
    const std::string path = describe(index);
    StageTimer timer(Stage::Read);  // the file and a JPEG's header (other formats decode here)
    return {EncodedImage::from_bytes(read_file_bytes(path), path, want_), label(index)};
  }

 private:
  std::string root_;
  std::vector<std::string> classes_;
  int64_t want_;
  std::string pool_;
  std::vector<size_t> ends_;
  std::vector<int32_t> labels_;
};

}  // namespace

std::shared_ptr<Dataset> open_image_folder(const std::string& dir, int64_t want_channels) {
  if (!fs::is_directory(dir))
    throw DataError("open_dataset: dataset folder " + dir + " does not exist or is not a folder");
  std::vector<std::string> classes;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && !hidden(entry.path())) classes.push_back(entry.path().filename().string());
  std::sort(classes.begin(), classes.end());
  if (classes.empty())
    throw DataError("open_dataset: no class folders in " + dir + " (an image folder dataset is " + dir +
                    "/<class>/<image>, one folder per class)");

  std::string root = fs::path(dir).lexically_normal().generic_string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  auto ds = std::make_shared<ImageFolderDataset>(root, classes, want_channels);
  for (size_t c = 0; c < classes.size(); ++c) {
    const std::vector<std::string> images = list_images(root, fs::path(root) / classes[c]);
    if (images.empty())
      throw DataError("open_dataset: class folder " + root + "/" + classes[c] +
                      " has no images (no file with an extension among " + extension_list() + ", case-insensitive)");
    for (const auto& rel : images) ds->add(rel, static_cast<int64_t>(c));
  }
  return ds;
}

}  // namespace tessera::data
