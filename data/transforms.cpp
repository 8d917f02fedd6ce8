// timm / torchvision per-image transforms; semantics and sources in data/transforms.h.
#include "tessera/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/core/error.h"

namespace tessera::data {

namespace {

// n standard normal samples, two per pair of uniforms (Box-Muller's cosine and sine branches).
void fill_standard_normal(float* dst, int64_t n, SampleRng& rng) {
  for (int64_t i = 0; i < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(1.0 - rng.uniform())), angle = 6.283185307179586 * rng.uniform();
    dst[i] = static_cast<float>(r * std::cos(angle));
    if (i + 1 < n) dst[i + 1] = static_cast<float>(r * std::sin(angle));
  }
}

void check_range(const std::array<double, 2>& r, const char* op, const char* what) {
  TS_CHECK(std::isfinite(r[0]) && std::isfinite(r[1]) && r[0] > 0 && r[0] <= r[1], op, ": expected 0 < ", what,
           "[0] <= ", what, "[1], got (", r[0], ", ", r[1], ")");
}

}  // namespace

// ---- cropping and resizing -------------------------------------------------------------------------

Box random_resized_crop_box(int64_t height, int64_t width, const std::array<double, 2>& scale,
                            const std::array<double, 2>& ratio, SampleRng& rng) {
  TS_CHECK(height > 0 && width > 0, "random_resized_crop: expected a non-empty image, got ", height, "x", width);
  check_range(scale, "random_resized_crop", "scale");
  check_range(ratio, "random_resized_crop", "ratio");
  const double area = static_cast<double>(height * width);
  const double log_r0 = std::log(ratio[0]), log_r1 = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = rng.uniform(scale[0], scale[1]) * area;
    const double aspect = std::exp(rng.uniform(log_r0, log_r1));
    const int64_t w = python_round(std::sqrt(target_area * aspect));
    const int64_t h = python_round(std::sqrt(target_area / aspect));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int64_t top = rng.randint(0, height - h);
      const int64_t left = rng.randint(0, width - w);
      return {top, left, h, w};
    }
  }
  // Fallback: the whole image, cropped centrally to the nearest allowed aspect ratio.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio[0]) {
    h = std::max<int64_t>(python_round(static_cast<double>(w) / ratio[0]), 1);
  } else if (in_ratio > ratio[1]) {
    w = std::max<int64_t>(python_round(static_cast<double>(h) * ratio[1]), 1);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Image random_resized_crop(const Image& img, int64_t out_h, int64_t out_w, const std::array<double, 2>& scale,
                          const std::array<double, 2>& ratio, Interpolation interp, SampleRng& rng) {
  const Box box = random_resized_crop_box(img.height, img.width, scale, ratio, rng);
  return resized_crop(img, box, out_h, out_w, interp);
}

std::array<int64_t, 2> shorter_side_size(int64_t height, int64_t width, int64_t size) {
  TS_CHECK(height > 0 && width > 0 && size > 0, "resize: expected a non-empty image and a positive size, got ", height,
           "x", width, " and size ", size);
  const int64_t shorter = std::min(height, width), longer = std::max(height, width);
  const auto new_long = static_cast<int64_t>(static_cast<double>(size * longer) / static_cast<double>(shorter));
  return width <= height ? std::array<int64_t, 2>{new_long, size} : std::array<int64_t, 2>{size, new_long};
}

Image resize_shorter_side(const Image& img, int64_t size, Interpolation interp) {
  const auto [h, w] = shorter_side_size(img.height, img.width, size);
  return resize(img, h, w, interp);
}

Box center_crop_box(int64_t height, int64_t width, int64_t crop_h, int64_t crop_w) {
  TS_CHECK(crop_h > 0 && crop_w > 0, "center_crop: expected a positive crop size, got ", crop_h, "x", crop_w);
  const int64_t pad_top = crop_h > height ? (crop_h - height) / 2 : 0;
  const int64_t pad_left = crop_w > width ? (crop_w - width) / 2 : 0;
  const int64_t padded_h = crop_h > height ? crop_h : height;  // (d // 2) + ((d + 1) // 2) = d
  const int64_t padded_w = crop_w > width ? crop_w : width;
  const int64_t top = python_round(static_cast<double>(padded_h - crop_h) / 2.0);
  const int64_t left = python_round(static_cast<double>(padded_w - crop_w) / 2.0);
  return {top - pad_top, left - pad_left, crop_h, crop_w};
}

Image center_crop(const Image& img, int64_t crop_h, int64_t crop_w) {
  return crop_padded(img, center_crop_box(img.height, img.width, crop_h, crop_w), PadMode::Constant);
}

int64_t eval_scale_size(int64_t img_size, double crop_pct) {
  TS_CHECK(crop_pct > 0 && crop_pct <= 1, "eval transform: expected 0 < crop_pct <= 1, got ", crop_pct);
  return static_cast<int64_t>(std::floor(static_cast<double>(img_size) / crop_pct));
}

Image resize_center_crop(const Image& img, int64_t scale_size, int64_t img_size, Interpolation interp) {
  const auto [h, w] = shorter_side_size(img.height, img.width, scale_size);
  const Box box = center_crop_box(h, w, img_size, img_size);
  if (box.top >= 0 && box.left >= 0 && box.top + box.height <= h && box.left + box.width <= w) {
    return resized_crop(img, {0, 0, img.height, img.width}, h, w, interp, &box);
  }
  return crop_padded(resize(img, h, w, interp), box, PadMode::Constant);
}

Image random_crop(const Image& img, int64_t out_h, int64_t out_w, int64_t padding, PadMode mode, const Fill& fill,
                  SampleRng& rng) {
  TS_CHECK(padding >= 0, "random_crop: expected padding >= 0, got ", padding);
  const int64_t ph = img.height + 2 * padding, pw = img.width + 2 * padding;
  TS_CHECK(out_h > 0 && out_w > 0 && out_h <= ph && out_w <= pw, "random_crop: crop size ", out_h, "x", out_w,
           " does not fit the ", img.height, "x", img.width, " image padded by ", padding, " (", ph, "x", pw, ")");
  int64_t top = 0, left = 0;
  if (out_h != ph || out_w != pw) {  // torchvision draws nothing when the crop is the whole image
    top = rng.randint(0, ph - out_h);
    left = rng.randint(0, pw - out_w);
  }
  return crop_padded(img, {top - padding, left - padding, out_h, out_w}, mode, fill);
}

// ---- flips and colour ------------------------------------------------------------------------------

bool random_hflip(Image& img, double p, SampleRng& rng) {
  const bool flip = rng.uniform() < p;
  if (flip) hflip(img);
  return flip;
}

bool random_vflip(Image& img, double p, SampleRng& rng) {
  const bool flip = rng.uniform() < p;
  if (flip) vflip(img);
  return flip;
}

void ColorJitter::operator()(Image& img, SampleRng& rng) const {
  TS_CHECK(brightness >= 0 && contrast >= 0 && saturation >= 0, "color_jitter: expected non-negative strengths, got (",
           brightness, ", ", contrast, ", ", saturation, ")");
  // torchvision draws the order first (a random permutation), then the factors.
  int order[3] = {0, 1, 2};
  for (int i = 2; i > 0; --i) std::swap(order[i], order[rng.randint(0, i)]);
  const double strength[3] = {brightness, contrast, saturation};
  double factor[3] = {1.0, 1.0, 1.0};
  for (int k = 0; k < 3; ++k) {
    if (strength[k] > 0) factor[k] = rng.uniform(std::max(0.0, 1.0 - strength[k]), 1.0 + strength[k]);
  }
  for (int k : order) {
    if (strength[k] <= 0) continue;
    if (k == 0) enhance_brightness(img, factor[k]);
    if (k == 1) enhance_contrast(img, factor[k]);
    if (k == 2) enhance_color(img, factor[k]);
  }
}

// ---- to tensor -------------------------------------------------------------------------------------

ToTensorNormalize::ToTensorNormalize(const std::vector<double>& mean, const std::vector<double>& std) {
  TS_CHECK(!mean.empty() && mean.size() == std.size(),
           "normalize: expected mean and std of the same non-zero length, got ", mean.size(), " and ", std.size());
  tables_.resize(mean.size());
  for (size_t c = 0; c < mean.size(); ++c) {
    TS_CHECK(std::isfinite(mean[c]) && std::isfinite(std[c]) && std[c] > 0,
             "normalize: expected finite mean and std > 0, got mean ", mean[c], " and std ", std[c], " for channel ",
             c);
    const float m = static_cast<float>(mean[c]), s = static_cast<float>(std[c]);
    for (int v = 0; v < 256; ++v) tables_[c][v] = (static_cast<float>(v) / 255.0f - m) / s;
  }
}

Tensor ToTensorNormalize::operator()(const Image& img) const {
  Tensor out = Tensor::empty({img.channels, img.height, img.width}, DType::Float32);
  write(img, out.data<float>());
  return out;
}

void ToTensorNormalize::write(const Image& img, float* out) const {
  const int64_t C = img.channels, H = img.height, W = img.width;
  TS_CHECK(C == channels(), "normalize: the image has ", C, " channels but mean/std have ", channels(), " entries");
  TS_CHECK(static_cast<int64_t>(img.pixels.size()) == H * W * C && H > 0 && W > 0, "normalize: expected a non-empty ",
           H, "x", W, "x", C, " image, got ", img.pixels.size(), " bytes");
  const int64_t plane = H * W;
  for (int64_t c = 0; c < C; ++c) {
    const float* table = tables_[c].data();
    const uint8_t* p = img.pixels.data() + c;
    float* oc = out + c * plane;
    for (int64_t i = 0; i < plane; ++i, p += C) oc[i] = table[*p];
  }
}

// ---- random erasing --------------------------------------------------------------------------------

void RandomErasing::validate() const {
  TS_CHECK(probability >= 0 && probability <= 1, "random_erasing: expected probability in [0, 1], got ", probability);
  TS_CHECK(mode == "pixel" || mode == "rand" || mode == "const",
           "random_erasing: expected mode \"pixel\", \"rand\" or \"const\", got \"", mode, "\"");
  TS_CHECK(min_area > 0 && min_area <= max_area && max_area <= 1,
           "random_erasing: expected 0 < min_area <= max_area <= 1, got (", min_area, ", ", max_area, ")");
  TS_CHECK(min_aspect > 0 && min_aspect <= max_aspect, "random_erasing: expected 0 < min_aspect <= max_aspect, got (",
           min_aspect, ", ", max_aspect, ")");
  TS_CHECK(min_count >= 1 && min_count <= max_count, "random_erasing: expected 1 <= min_count <= max_count, got (",
           min_count, ", ", max_count, ")");
}

std::vector<Box> RandomErasing::operator()(Tensor& img, SampleRng& rng) const {
  TS_CHECK(img.defined() && img.dim() == 3 && img.dtype() == DType::Float32 && img.is_contiguous(),
           "random_erasing: expected a contiguous float32 [C, H, W] tensor, got ",
           img.defined() ? describe(img) : "undefined");
  return erase(img.data<float>(), img.size(0), img.size(1), img.size(2), rng);
}

std::vector<Box> RandomErasing::erase(float* data, int64_t C, int64_t H, int64_t W, SampleRng& rng) const {
  validate();
  std::vector<Box> boxes;
  if (rng.uniform() > probability) return boxes;
  const double area = static_cast<double>(H * W);
  const double log_a0 = std::log(min_aspect), log_a1 = std::log(max_aspect);
  const int64_t count = min_count == max_count ? min_count : rng.randint(min_count, max_count);
  const bool per_pixel = mode == "pixel", per_channel = mode == "rand";
  for (int64_t k = 0; k < count; ++k) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target_area = rng.uniform(min_area, max_area) * area / static_cast<double>(count);
      const double aspect = std::exp(rng.uniform(log_a0, log_a1));
      const int64_t h = python_round(std::sqrt(target_area * aspect));
      const int64_t w = python_round(std::sqrt(target_area / aspect));
      if (w < W && h < H) {
        const int64_t top = rng.randint(0, H - h), left = rng.randint(0, W - w);
        for (int64_t c = 0; c < C; ++c) {
          const float channel_value = per_channel ? static_cast<float>(rng.normal()) : 0.0f;
          for (int64_t y = top; y < top + h; ++y) {
            float* row = data + (c * H + y) * W + left;
            if (per_pixel) {
              fill_standard_normal(row, w, rng);
            } else {
              std::fill(row, row + w, channel_value);
            }
          }
        }
        boxes.push_back({top, left, h, w});
        break;
      }
    }
  }
  return boxes;
}

}  // namespace tessera::data
