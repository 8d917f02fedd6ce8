// Attention maps drawn over their image; see tools/cli/attention_picture.h.
#include "tools/cli/attention_picture.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "tessera/data/transforms.h"
#include "tessera/ops/ops.h"

namespace tessera::cli {

namespace {

constexpr double kOutsideCrop = 0.35;  // brightness of the pixels the model did not see

uint8_t to_byte(double v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L)); }

int64_t bar_width(int64_t height) { return std::max<int64_t>(6, height / 16); }

}  // namespace

std::array<double, 3> heat_color(double v) {
  const double r = std::clamp(1.5 - std::abs(4 * v - 3), 0.0, 1.0);
  const double g = std::clamp(1.5 - std::abs(4 * v - 2), 0.0, 1.0);
  const double b = std::clamp(1.5 - std::abs(4 * v - 1), 0.0, 1.0);
  return {r, g, b};
}

data::Box eval_crop_in_image(int64_t height, int64_t width, int64_t img_size, double crop_pct) {
  const auto [h, w] = data::shorter_side_size(height, width, data::eval_scale_size(img_size, crop_pct));
  const data::Box resized = data::center_crop_box(h, w, img_size, img_size);
  const double sy = static_cast<double>(height) / static_cast<double>(h);
  const double sx = static_cast<double>(width) / static_cast<double>(w);
  data::Box box;
  box.top = std::llround(resized.top * sy);
  box.left = std::llround(resized.left * sx);
  box.height = std::max<int64_t>(1, std::llround(resized.height * sy));
  box.width = std::max<int64_t>(1, std::llround(resized.width * sx));
  return box;
}

int64_t colorbar_width(int64_t height) { return bar_width(height) + std::max<int64_t>(2, bar_width(height) / 2); }

data::Image attention_picture(const Tensor& map, const data::Image& image, const data::Box& crop) {
  TS_CHECK(map.dim() == 2 && (image.channels == 1 || image.channels == 3), "attention picture: expected a map [h, w] ",
           "and a 1- or 3-channel image, got ", map.shape(), " and ", image.channels, " channels");
  const int64_t H = image.height, W = image.width, bar_cols = colorbar_width(H);
  const Tensor up = interpolate(map.to(Device::cpu()).to(DType::Float32).unsqueeze(0).unsqueeze(0),
                                {crop.height, crop.width}, InterpolationMode::Bilinear)
                        .contiguous();
  const float* a = up.data<float>();
  const auto [lo_it, hi_it] = std::minmax_element(a, a + up.numel());
  const double lo = *lo_it, hi = *hi_it;
  auto level = [&](double v) { return hi > lo ? (v - lo) / (hi - lo) : 0.0; };

  data::Image out(H, W + bar_cols, 3);
  std::fill(out.pixels.begin(), out.pixels.end(), uint8_t{255});
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const uint8_t* px = image.at(y, x);
      uint8_t* o = out.at(y, x);
      const int64_t cy = y - crop.top, cx = x - crop.left;
      const bool seen = cy >= 0 && cy < crop.height && cx >= 0 && cx < crop.width;
      const auto c = heat_color(seen ? level(a[cy * crop.width + cx]) : 0.0);
      for (int k = 0; k < 3; ++k) {
        const double base = px[image.channels == 3 ? k : 0];  // gray images: the same value in R, G, B
        o[k] = to_byte(seen ? (1 - kHeatWeight) * base + kHeatWeight * 255.0 * c[k] : kOutsideCrop * base);
      }
    }
  // The colorbar: the ramp from the maximum (top) to the minimum (bottom), after a white gap.
  const int64_t bar_left = W + bar_cols - bar_width(H);
  for (int64_t y = 0; y < H; ++y) {
    const auto c = heat_color(H > 1 ? 1.0 - static_cast<double>(y) / static_cast<double>(H - 1) : 1.0);
    for (int64_t x = bar_left; x < W + bar_cols; ++x)
      for (int k = 0; k < 3; ++k) out.at(y, x)[k] = to_byte(255.0 * c[k]);
  }
  return out;
}

}  // namespace tessera::cli
