// The per-image transforms of timm's training and evaluation pipelines (timm/data/transforms.py,
// transforms_factory.py, random_erasing.py, and the torchvision transforms they use), with the
// same parameter sampling and the same pixel arithmetic (through data/image_ops.h, which matches
// Pillow). Randomness comes from the sample's SampleRng (data/rng.h), so a sample's augmentation
// is a pure function of (seed, epoch, index); the draws follow timm's order but of course not
// Python's random numbers.
//
// Python's round() rounds halves to even; every place timm rounds, python_round is used.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/data/image.h"
#include "tessera/data/image_ops.h"
#include "tessera/data/rng.h"

namespace tessera::data {

// Python's round(v) (half to even), as an integer.
inline int64_t python_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

// ImageNet statistics (timm/data/constants.py). Functions rather than namespace-scope vectors: those
// are built during static initialisation, in an order across translation units that nothing fixes,
// so a default read from another unit's initialiser could find them still empty.
inline std::vector<double> imagenet_mean() { return {0.485, 0.456, 0.406}; }
inline std::vector<double> imagenet_std() { return {0.229, 0.224, 0.225}; }

// ---- cropping and resizing -------------------------------------------------------------------------

// timm RandomResizedCropAndInterpolation.get_params: up to 10 tries of area ~ U(scale) * H * W and
// log-aspect ~ U(log ratio), w = round(sqrt(area * r)), h = round(sqrt(area / r)), accepted when
// the crop fits (and, unlike timm, is at least 1 pixel, so tiny images cannot produce an empty
// crop), placed uniformly; otherwise the central crop of the whole image clamped to the ratio
// range. scale and ratio are (min, max).
Box random_resized_crop_box(int64_t height, int64_t width, const std::array<double, 2>& scale,
                            const std::array<double, 2>& ratio, SampleRng& rng);

// The crop above resized to out_h x out_w (torchvision resized_crop on a PIL image).
Image random_resized_crop(const Image& img, int64_t out_h, int64_t out_w, const std::array<double, 2>& scale,
                          const std::array<double, 2>& ratio, Interpolation interp, SampleRng& rng);

// torchvision Resize(size) with an int size: the shorter side becomes `size`, the longer
// int(size * long / short). Returns {new_h, new_w}.
std::array<int64_t, 2> shorter_side_size(int64_t height, int64_t width, int64_t size);
Image resize_shorter_side(const Image& img, int64_t size, Interpolation interp);

// torchvision CenterCrop: top = round((H - h) / 2), left = round((W - w) / 2) (Python rounding),
// after zero-padding an image smaller than the crop ((d // 2) before, ((d + 1) // 2) after).
// The box is in the unpadded image's coordinates, so it may start at a negative offset.
Box center_crop_box(int64_t height, int64_t width, int64_t crop_h, int64_t crop_w);
Image center_crop(const Image& img, int64_t crop_h, int64_t crop_w);

// timm's eval resize: scale_size = floor(img_size / crop_pct) (224 and 0.875 -> 256).
int64_t eval_scale_size(int64_t img_size, double crop_pct);

// Resize the shorter side to `scale_size` and center-crop img_size x img_size: the eval
// pipeline's geometry, computing only the pixels that survive the crop (the same values as
// resizing fully and cropping). A resized image smaller than the crop is zero-padded as
// torchvision's CenterCrop does.
Image resize_center_crop(const Image& img, int64_t scale_size, int64_t img_size, Interpolation interp);

// torchvision RandomCrop(size, padding): pad every side by `padding` (constant fill, reflect or
// edge), then take a uniformly placed out_h x out_w crop of the padded image.
Image random_crop(const Image& img, int64_t out_h, int64_t out_w, int64_t padding, PadMode mode, const Fill& fill,
                  SampleRng& rng);

// ---- flips and colour ------------------------------------------------------------------------------

// torchvision RandomHorizontalFlip / RandomVerticalFlip: flip when uniform() < p. Returns whether
// it flipped.
bool random_hflip(Image& img, double p, SampleRng& rng);
bool random_vflip(Image& img, double p, SampleRng& rng);

// torchvision ColorJitter(brightness, contrast, saturation) (no hue): each enabled component
// draws a factor ~ U(max(0, 1 - v), 1 + v); the three are applied in a random order
// (ImageEnhance Brightness, Contrast, Color). A component of 0 is off.
struct ColorJitter {
  double brightness = 0.0, contrast = 0.0, saturation = 0.0;
  void operator()(Image& img, SampleRng& rng) const;
};

// ---- to tensor -------------------------------------------------------------------------------------

// ToTensor + Normalize: out[c, y, x] = (v / 255 - mean[c]) / std[c], in float32 exactly as
// torchvision computes it (so the values are bit-identical), through a 256-entry table per
// channel. mean and std need one entry per image channel.
class ToTensorNormalize {
 public:
  ToTensorNormalize(const std::vector<double>& mean, const std::vector<double>& std);
  Tensor operator()(const Image& img) const;  // float32 [C, H, W]
  // The same into `out`, C * H * W floats (a slot of a batch).
  void write(const Image& img, float* out) const;
  int64_t channels() const { return static_cast<int64_t>(tables_.size()); }

 private:
  std::vector<std::array<float, 256>> tables_;
};

// ---- random erasing (timm/data/random_erasing.py), on the normalized tensor ------------------------

struct RandomErasing {
  double probability = 0.5;
  double min_area = 0.02, max_area = 1.0 / 3.0;
  double min_aspect = 0.3, max_aspect = 1.0 / 0.3;
  std::string mode = "pixel";  // "pixel": per-pixel N(0,1); "rand": per-channel N(0,1); "const": 0
  int64_t min_count = 1, max_count = 1;

  // With probability `probability`: count ~ U{min_count..max_count} boxes, each found in up to 10
  // tries of area ~ U(min_area, max_area) * H * W / count, log-uniform aspect,
  // h = round(sqrt(area * aspect)), w = round(sqrt(area / aspect)), accepted when h < H and
  // w < W, then filled. `img` is a contiguous float32 [C, H, W] tensor modified in place; returns
  // the erased boxes.
  std::vector<Box> operator()(Tensor& img, SampleRng& rng) const;
  // The same on C planes of H x W floats at `data` (a slot of a batch).
  std::vector<Box> erase(float* data, int64_t C, int64_t H, int64_t W, SampleRng& rng) const;
  void validate() const;  // throws for a bad mode or ranges
};

}  // namespace tessera::data
