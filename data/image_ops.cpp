// Pillow-exact image primitives; the semantics (and the Pillow sources they follow) are described
// in data/image_ops.h. Kernels are templated on the channel count (1 or 3) so the per-pixel
// channel loops unroll; nothing allocates inside a pixel loop.
#include "tessera/data/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <type_traits>
#include <vector>

#include "tessera/core/error.h"

namespace tessera::data {

namespace {

void check_image(const Image& img, const char* op) {
  TS_CHECK(img.channels == 1 || img.channels == 3, op, ": expected an image with 1 or 3 channels, got ", img.channels);
  TS_CHECK(img.height > 0 && img.width > 0, op, ": expected a non-empty image, got ", img.height, "x", img.width);
  TS_CHECK(static_cast<int64_t>(img.pixels.size()) == img.height * img.width * img.channels, op, ": the image holds ",
           img.pixels.size(), " bytes, expected height * width * channels = ", img.height * img.width * img.channels);
}

// Calls f(std::integral_constant<int, C>) for the image's channel count.
template <class F>
void with_channels(int64_t channels, const F& f) {
  if (channels == 1) {
    f(std::integral_constant<int, 1>{});
  } else {
    f(std::integral_constant<int, 3>{});
  }
}

// ---- resampling (Pillow libImaging/Resample.c) ---------------------------------------------------

constexpr int kPrecisionBits = 32 - 8 - 2;  // fixed-point fraction bits of the filter weights

double triangle_filter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution kernel with a = -0.5.
double cubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// For each output index: the first input index, the number of taps and the fixed-point weights.
struct Taps {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weight;  // [out_size * ksize]
};

// The taps of resampling the span [in0, in0 + in_span) of `in_size` input pixels to `out_size`
// outputs: centres follow the span (Pillow's precompute_coeffs with a box), taps are clamped to
// [0, in_size). A whole-pixel window is in0 = 0, in_span = in_size.
Taps precompute_taps(int64_t in_size, double in0, double in_span, int64_t out_size, Interpolation interp) {
  const bool cubic = interp == Interpolation::Bicubic;
  double (*filter)(double) = cubic ? cubic_filter : triangle_filter;
  const double scale = in_span / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);  // stretch the filter when downscaling
  const double support = (cubic ? 2.0 : 1.0) * filterscale;
  Taps t;
  t.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.weight.assign(out_size * t.ksize, 0);
  std::vector<double> w(t.ksize);
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // (int) truncates towards zero, as in C; negatives are clamped to 0 anyway.
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t xmax = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size);
    const int64_t n = xmax - xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < n; ++x) {
      w[x] = filter((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    int32_t* k = &t.weight[xx * t.ksize];
    for (int64_t x = 0; x < n; ++x) {
      const double v = (ww != 0.0 ? w[x] / ww : w[x]) * (1 << kPrecisionBits);
      k[x] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
    }
    t.first[xx] = xmin;
    t.count[xx] = n;
  }
  return t;
}

inline uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;  // arithmetic shift (C++20)
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

// Horizontal pass over `rows` rows starting at `in` (row stride `in_stride` bytes; `in` points at
// the window's column 0): output columns [c0, c1) of the resized row, written densely to `out`.
// Rows are processed in tiles of kTileRows, transposed so that one tap's samples of every row
// and channel of the tile are contiguous: the multiply-accumulate then runs over kTileRows * C
// lanes (vectorised), instead of over C lanes per output pixel.
template <int C>
void horizontal_pass(const uint8_t* in, int64_t in_stride, int64_t rows, const Taps& t, int64_t c0, int64_t c1,
                     uint8_t* out) {
  constexpr int64_t kTileRows = 16, RC = kTileRows * C;
  int64_t x_lo = t.first[c0], x_hi = 0;
  for (int64_t xx = c0; xx < c1; ++xx) {
    x_lo = std::min(x_lo, t.first[xx]);
    x_hi = std::max(x_hi, t.first[xx] + t.count[xx]);
  }
  const int64_t span = x_hi - x_lo, out_stride = (c1 - c0) * C;
  std::vector<uint8_t> tile(span * RC);
  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const int64_t nr = std::min(kTileRows, rows - r0);
    if (nr < kTileRows) std::fill(tile.begin(), tile.end(), 0);  // unused lanes compute zeros
    for (int64_t r = 0; r < nr; ++r) {
      const uint8_t* src = in + (r0 + r) * in_stride + x_lo * C;
      uint8_t* dst = tile.data() + r * C;
      for (int64_t x = 0; x < span; ++x, src += C, dst += RC) {
        for (int c = 0; c < C; ++c) dst[c] = src[c];
      }
    }
    for (int64_t xx = c0; xx < c1; ++xx) {
      const int32_t* k = &t.weight[xx * t.ksize];
      const uint8_t* p = tile.data() + (t.first[xx] - x_lo) * RC;
      int32_t acc[RC];
      for (int64_t e = 0; e < RC; ++e) acc[e] = kHalf;
      for (int64_t i = 0; i < t.count[xx]; ++i, p += RC) {
        const int32_t ki = k[i];
        for (int64_t e = 0; e < RC; ++e) acc[e] += p[e] * ki;
      }
      uint8_t* o = out + r0 * out_stride + (xx - c0) * C;
      for (int64_t r = 0; r < nr; ++r, o += out_stride) {
        for (int c = 0; c < C; ++c) o[c] = clip8(acc[r * C + c]);
      }
    }
  }
}

// Vertical pass: output rows [r0, r1) of `elems` bytes each. Input row j (in window coordinates)
// is at in + (j - base_row) * in_stride.
void vertical_pass(const uint8_t* in, int64_t in_stride, int64_t base_row, int64_t elems, const Taps& t, int64_t r0,
                   int64_t r1, uint8_t* out) {
  std::vector<int32_t> acc(elems);
  for (int64_t yy = r0; yy < r1; ++yy, out += elems) {
    std::fill(acc.begin(), acc.end(), kHalf);
    const int32_t* k = &t.weight[yy * t.ksize];
    for (int64_t i = 0; i < t.count[yy]; ++i) {
      const uint8_t* row = in + (t.first[yy] + i - base_row) * in_stride;
      const int32_t ki = k[i];
      for (int64_t e = 0; e < elems; ++e) acc[e] += row[e] * ki;
    }
    for (int64_t e = 0; e < elems; ++e) out[e] = clip8(acc[e]);
  }
}

// ---- affine warps (Pillow libImaging/Geometry.c, ImagingGenericTransform) ------------------------

// PIL's transform-cubic through four samples (a = -1 kernel), evaluated at d in [0, 1).
inline double cubic_through(double v1, double v2, double v3, double v4, double d) {
  const double p1 = v2;
  const double p2 = -v1 + v3;
  const double p3 = 2 * (v1 - v2) + v3 - v4;
  const double p4 = -v1 + v2 - v3 + v4;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

template <int C, bool kCubic>
void affine_kernel(const Image& in, Image& out, const std::array<double, 6>& a, const Fill& fill) {
  const int64_t W = in.width, H = in.height;
  const int64_t stride = W * C;
  const uint8_t* base = in.pixels.data();
  auto xclip = [W](int64_t x) { return x < 0 ? 0 : x < W ? x : W - 1; };
  auto yclip = [H](int64_t y) { return y < 0 ? 0 : y < H ? y : H - 1; };
  uint8_t* o = out.pixels.data();
  for (int64_t y = 0; y < out.height; ++y) {
    const double yo = y + 0.5;
    for (int64_t x = 0; x < out.width; ++x, o += C) {
      const double xo = x + 0.5;
      double xin = a[0] * xo + a[1] * yo + a[2];
      double yin = a[3] * xo + a[4] * yo + a[5];
      if (xin < 0.0 || xin >= W || yin < 0.0 || yin >= H) {
        for (int c = 0; c < C; ++c) o[c] = fill[c];
        continue;
      }
      xin -= 0.5;
      yin -= 0.5;
      const int64_t fx = static_cast<int64_t>(std::floor(xin)), fy = static_cast<int64_t>(std::floor(yin));
      const double dx = xin - fx, dy = yin - fy;
      if constexpr (!kCubic) {
        // A row below the image repeats the row's value: the same as reading the clamped row.
        const uint8_t* r0 = base + yclip(fy) * stride;
        const uint8_t* r1 = fy + 1 >= 0 && fy + 1 < H ? base + (fy + 1) * stride : r0;
        const int64_t x0 = xclip(fx) * C, x1 = xclip(fx + 1) * C;
        for (int c = 0; c < C; ++c) {
          const double v1 = r0[x0 + c] + (r0[x1 + c] - r0[x0 + c]) * dx;
          const double v2 = r1[x0 + c] + (r1[x1 + c] - r1[x0 + c]) * dx;
          o[c] = static_cast<uint8_t>(v1 + (v2 - v1) * dy);
        }
      } else {
        const int64_t x0 = fx - 1, y0 = fy - 1;
        int64_t xs[4];
        for (int i = 0; i < 4; ++i) xs[i] = xclip(x0 + i) * C;
        // Row 0 is clamped into the image; a later row outside it repeats the previous row's
        // value, which is what reading the previous row again computes.
        const uint8_t* rows[4];
        rows[0] = base + yclip(y0) * stride;
        for (int i = 1; i < 4; ++i) rows[i] = y0 + i >= 0 && y0 + i < H ? base + (y0 + i) * stride : rows[i - 1];
        double v[4][C];
        for (int i = 0; i < 4; ++i) {
          for (int c = 0; c < C; ++c) {
            const uint8_t* r = rows[i] + c;
            v[i][c] = cubic_through(r[xs[0]], r[xs[1]], r[xs[2]], r[xs[3]], dx);
          }
        }
        for (int c = 0; c < C; ++c) {
          const double res = cubic_through(v[0][c], v[1][c], v[2][c], v[3][c], dy);
          o[c] = res <= 0.0 ? 0 : res >= 255.0 ? 255 : static_cast<uint8_t>(res);
        }
      }
    }
  }
}

// Python's round(v, 15): correctly rounded to 15 decimals, which printf/strtod also are.
double round15(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15f", v);
  return std::strtod(buf, nullptr);
}

// ---- PIL's enhance blend ---------------------------------------------------------------------------

// Image.blend(degenerate, image, alpha) for one sample: float arithmetic, truncated, clipped.
inline uint8_t blend_px(int d, int v, float alpha) {
  const float t = static_cast<float>(d) + alpha * static_cast<float>(v - d);
  return t <= 0.f ? 0 : t >= 255.f ? 255 : static_cast<uint8_t>(t);
}

Lut blend_lut(int degenerate, double factor) {
  Lut lut;
  const float alpha = static_cast<float>(factor);  // PIL takes the factor as a C float
  for (int v = 0; v < 256; ++v) lut[v] = blend_px(degenerate, v, alpha);
  return lut;
}

inline int luma(const uint8_t* p) { return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16; }

template <int C>
void apply_channel_luts(Image& img, const Lut* luts) {
  uint8_t* p = img.pixels.data();
  const int64_t n = img.height * img.width;
  for (int64_t i = 0; i < n; ++i, p += C) {
    for (int c = 0; c < C; ++c) p[c] = luts[c][p[c]];
  }
}

void apply_luts(Image& img, const Lut* luts) {
  with_channels(img.channels, [&](auto c) { apply_channel_luts<decltype(c)::value>(img, luts); });
}

using Histogram = std::array<int64_t, 256>;

std::vector<Histogram> histograms(const Image& img) {
  std::vector<Histogram> h(img.channels);
  for (auto& hc : h) hc.fill(0);
  const uint8_t* p = img.pixels.data();
  const int64_t n = img.height * img.width;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < img.channels; ++c) ++h[c][*p++];
  }
  return h;
}

Lut identity_lut() {
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v);
  return lut;
}

}  // namespace

Interpolation parse_interpolation(const std::string& name) {
  if (name == "bilinear") return Interpolation::Bilinear;
  if (name == "bicubic") return Interpolation::Bicubic;
  TS_CHECK(false, "interpolation: expected \"bilinear\" or \"bicubic\", got \"", name, "\"");
  return Interpolation::Bilinear;
}

const char* interpolation_name(Interpolation interp) {
  return interp == Interpolation::Bicubic ? "bicubic" : "bilinear";
}

PadMode parse_pad_mode(const std::string& name) {
  if (name == "constant") return PadMode::Constant;
  if (name == "reflect") return PadMode::Reflect;
  if (name == "edge") return PadMode::Edge;
  TS_CHECK(false, "pad: expected padding mode \"constant\", \"reflect\" or \"edge\", got \"", name, "\"");
  return PadMode::Constant;
}

// ---- geometry ------------------------------------------------------------------------------------

Image crop(const Image& img, const Box& box) {
  check_image(img, "crop");
  TS_CHECK(box.height > 0 && box.width > 0 && box.top >= 0 && box.left >= 0 && box.top + box.height <= img.height &&
               box.left + box.width <= img.width,
           "crop: box (top ", box.top, ", left ", box.left, ", height ", box.height, ", width ", box.width,
           ") is not inside the ", img.height, "x", img.width, " image");
  Image out(box.height, box.width, img.channels);
  const int64_t row_bytes = box.width * img.channels;
  for (int64_t y = 0; y < box.height; ++y) { std::memcpy(out.at(y, 0), img.at(box.top + y, box.left), row_bytes); }
  return out;
}

Image crop_padded(const Image& img, const Box& box, PadMode mode, const Fill& fill) {
  check_image(img, "crop_padded");
  TS_CHECK(box.height > 0 && box.width > 0, "crop_padded: expected a non-empty box, got ", box.height, "x", box.width);
  // Source index of each output row / column, or -1 for the fill colour.
  auto map_index = [mode](int64_t i, int64_t n) -> int64_t {
    if (i >= 0 && i < n) return i;
    switch (mode) {
      case PadMode::Constant: return -1;
      case PadMode::Edge: return i < 0 ? 0 : n - 1;
      case PadMode::Reflect: {
        const int64_t r = i < 0 ? -i : 2 * (n - 1) - i;
        TS_CHECK(r >= 0 && r < n, "crop_padded: reflect padding of ", (i < 0 ? -i : i - n + 1),
                 " pixels needs an image side longer than that, got ", n);
        return r;
      }
    }
    return -1;
  };
  std::vector<int64_t> cols(box.width);
  for (int64_t x = 0; x < box.width; ++x) cols[x] = map_index(box.left + x, img.width);
  // Output columns [x_in0, x_in1) read the source row contiguously: one memcpy per row.
  const int64_t x_in0 = std::clamp<int64_t>(-box.left, 0, box.width);
  const int64_t x_in1 = std::clamp<int64_t>(img.width - box.left, x_in0, box.width);
  Image out(box.height, box.width, img.channels);
  with_channels(img.channels, [&](auto ch) {
    constexpr int C = decltype(ch)::value;
    auto put = [&](uint8_t* o, int64_t sy, int64_t x) {
      const uint8_t* src = sy < 0 || cols[x] < 0 ? fill.data() : img.at(sy, cols[x]);
      for (int c = 0; c < C; ++c) o[c] = src[c];
    };
    for (int64_t y = 0; y < box.height; ++y) {
      const int64_t sy = map_index(box.top + y, img.height);
      uint8_t* o = out.at(y, 0);
      for (int64_t x = 0; x < x_in0; ++x) put(o + x * C, sy, x);
      if (sy >= 0 && x_in1 > x_in0) {
        std::memcpy(o + x_in0 * C, img.at(sy, box.left + x_in0), (x_in1 - x_in0) * C);
      } else {
        for (int64_t x = x_in0; x < x_in1; ++x) put(o + x * C, sy, x);
      }
      for (int64_t x = x_in1; x < box.width; ++x) put(o + x * C, sy, x);
    }
  });
  return out;
}

namespace {

// Where a resize reads: the whole pixels of the window (taps are clamped to them, as to a crop),
// and the exact span inside them that the output covers (fractional for a Window).
struct Span {
  Box pixels;
  double y0, height, x0, width;  // relative to pixels' top-left corner
  bool whole() const {
    return y0 == 0 && x0 == 0 && height == static_cast<double>(pixels.height) &&
           width == static_cast<double>(pixels.width);
  }
};

Image resample(const Image& img, const Span& span, int64_t out_h, int64_t out_w, Interpolation interp,
               const Box* out_region) {
  check_image(img, "resize");
  TS_CHECK(out_h > 0 && out_w > 0, "resize: expected a positive output size, got ", out_h, "x", out_w);
  const Box& window = span.pixels;
  TS_CHECK(window.height > 0 && window.width > 0 && window.top >= 0 && window.left >= 0 &&
               window.top + window.height <= img.height && window.left + window.width <= img.width,
           "resize: window (top ", window.top, ", left ", window.left, ", height ", window.height, ", width ",
           window.width, ") is not inside the ", img.height, "x", img.width, " image");
  const Box region = out_region ? *out_region : Box{0, 0, out_h, out_w};
  TS_CHECK(region.height > 0 && region.width > 0 && region.top >= 0 && region.left >= 0 &&
               region.top + region.height <= out_h && region.left + region.width <= out_w,
           "resize: output region (top ", region.top, ", left ", region.left, ", height ", region.height, ", width ",
           region.width, ") is not inside the ", out_h, "x", out_w, " output");
  const int64_t C = img.channels;
  const bool whole = span.whole();
  const bool need_h = !whole || out_w != window.width, need_v = !whole || out_h != window.height;
  if (!need_h && !need_v) {
    return crop(img, {window.top + region.top, window.left + region.left, region.height, region.width});
  }
  Image out(region.height, region.width, C);
  const int64_t src_stride = img.width * C;
  const uint8_t* win = img.at(window.top, window.left);
  if (!need_v) {  // horizontal only: output row r is window row r
    const Taps th = precompute_taps(window.width, span.x0, span.width, out_w, interp);
    with_channels(C, [&](auto c) {
      horizontal_pass<decltype(c)::value>(win + region.top * src_stride, src_stride, region.height, th, region.left,
                                          region.left + region.width, out.pixels.data());
    });
    return out;
  }
  const Taps tv = precompute_taps(window.height, span.y0, span.height, out_h, interp);
  if (!need_h) {  // vertical only: output column x is window column x
    vertical_pass(win + region.left * C, src_stride, 0, region.width * C, tv, region.top, region.top + region.height,
                  out.pixels.data());
    return out;
  }
  // The window rows the kept output rows read, resampled horizontally first (as PIL does).
  int64_t row0 = window.height, row1 = 0;
  for (int64_t yy = region.top; yy < region.top + region.height; ++yy) {
    row0 = std::min(row0, tv.first[yy]);
    row1 = std::max(row1, tv.first[yy] + tv.count[yy]);
  }
  const Taps th = precompute_taps(window.width, span.x0, span.width, out_w, interp);
  const int64_t tmp_stride = region.width * C;
  std::vector<uint8_t> tmp((row1 - row0) * tmp_stride);
  with_channels(C, [&](auto c) {
    horizontal_pass<decltype(c)::value>(win + row0 * src_stride, src_stride, row1 - row0, th, region.left,
                                        region.left + region.width, tmp.data());
  });
  vertical_pass(tmp.data(), tmp_stride, row0, tmp_stride, tv, region.top, region.top + region.height,
                out.pixels.data());
  return out;
}

}  // namespace

Image resized_crop(const Image& img, const Box& window, int64_t out_h, int64_t out_w, Interpolation interp,
                   const Box* out_region) {
  const Span span{window, 0.0, static_cast<double>(window.height), 0.0, static_cast<double>(window.width)};
  return resample(img, span, out_h, out_w, interp, out_region);
}

Image resized_crop_fractional(const Image& img, const Window& window, int64_t out_h, int64_t out_w,
                              Interpolation interp, const Box* out_region) {
  TS_CHECK(window.height > 0 && window.width > 0 && window.top >= 0 && window.left >= 0 &&
               window.top + window.height <= static_cast<double>(img.height) + 1e-9 &&
               window.left + window.width <= static_cast<double>(img.width) + 1e-9,
           "resize: window (top ", window.top, ", left ", window.left, ", height ", window.height, ", width ",
           window.width, ") is not inside the ", img.height, "x", img.width, " image");
  const auto whole_pixels = [](double start, double length, int64_t size, int64_t& first, int64_t& count) {
    first = std::min(static_cast<int64_t>(std::floor(start)), size - 1);
    const int64_t end = std::clamp(static_cast<int64_t>(std::ceil(start + length)), first + 1, size);
    count = end - first;
  };
  Span span{};
  whole_pixels(window.top, window.height, img.height, span.pixels.top, span.pixels.height);
  whole_pixels(window.left, window.width, img.width, span.pixels.left, span.pixels.width);
  span.y0 = window.top - static_cast<double>(span.pixels.top), span.height = window.height;
  span.x0 = window.left - static_cast<double>(span.pixels.left), span.width = window.width;
  return resample(img, span, out_h, out_w, interp, out_region);
}

Image resize(const Image& img, int64_t out_h, int64_t out_w, Interpolation interp) {
  return resized_crop(img, {0, 0, img.height, img.width}, out_h, out_w, interp);
}

void hflip(Image& img) {
  check_image(img, "hflip");
  with_channels(img.channels, [&](auto ch) {
    constexpr int C = decltype(ch)::value;
    for (int64_t y = 0; y < img.height; ++y) {
      uint8_t* l = img.at(y, 0);
      uint8_t* r = img.at(y, img.width - 1);
      for (; l < r; l += C, r -= C) {
        for (int c = 0; c < C; ++c) std::swap(l[c], r[c]);
      }
    }
  });
}

void vflip(Image& img) {
  check_image(img, "vflip");
  const int64_t row = img.width * img.channels;
  for (int64_t y = 0; y < img.height / 2; ++y) {
    std::swap_ranges(img.at(y, 0), img.at(y, 0) + row, img.at(img.height - 1 - y, 0));
  }
}

Image affine(const Image& img, const std::array<double, 6>& m, Interpolation interp, const Fill& fill) {
  check_image(img, "affine");
  Image out(img.height, img.width, img.channels);
  with_channels(img.channels, [&](auto c) {
    constexpr int C = decltype(c)::value;
    if (interp == Interpolation::Bicubic) {
      affine_kernel<C, true>(img, out, m, fill);
    } else {
      affine_kernel<C, false>(img, out, m, fill);
    }
  });
  return out;
}

Image rotate(const Image& img, double degrees, Interpolation interp, const Fill& fill) {
  check_image(img, "rotate");
  double angle = std::fmod(degrees, 360.0);  // Python's `angle % 360.0`
  if (angle < 0.0) angle += 360.0;
  if (angle == 0.0) return img;
  // Image.rotate builds the inverse map about the centre with cos/sin rounded to 15 decimals.
  const double rad = -(angle * (std::numbers::pi / 180.0));  // math.radians
  const double c = round15(std::cos(rad)), s = round15(std::sin(rad)), ms = round15(-std::sin(rad));
  const double cx = img.width / 2.0, cy = img.height / 2.0;
  std::array<double, 6> m = {c, s, 0.0, ms, c, 0.0};
  m[2] = c * -cx + s * -cy + 0.0 + cx;
  m[5] = ms * -cx + c * -cy + 0.0 + cy;
  return affine(img, m, interp, fill);
}

// ---- colour space --------------------------------------------------------------------------------

Image to_grayscale(const Image& img) {
  check_image(img, "to_grayscale");
  if (img.channels == 1) return img;
  Image out(img.height, img.width, 1);
  const uint8_t* p = img.pixels.data();
  for (auto& o : out.pixels) {
    o = static_cast<uint8_t>(luma(p));
    p += 3;
  }
  return out;
}

Image to_rgb(const Image& img) {
  check_image(img, "to_rgb");
  if (img.channels == 3) return img;
  Image out(img.height, img.width, 3);
  uint8_t* o = out.pixels.data();
  for (uint8_t v : img.pixels) {
    o[0] = o[1] = o[2] = v;
    o += 3;
  }
  return out;
}

// ---- lookup-table ops ----------------------------------------------------------------------------

void apply_lut(Image& img, const Lut& lut) {
  check_image(img, "apply_lut");
  for (auto& v : img.pixels) v = lut[v];
}

void invert(Image& img) {
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(255 - v);
  apply_lut(img, lut);
}

void posterize(Image& img, int bits) {
  if (bits >= 8) return;
  // ~(2 ** (8 - bits) - 1): no bit survives for bits <= 0 (timm reaches bits < 0 when mmax > 10).
  const int mask = bits <= 0 ? 0 : ~((1 << (8 - bits)) - 1);
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v & mask);
  apply_lut(img, lut);
}

void solarize(Image& img, int threshold) {
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v < threshold ? v : 255 - v);
  apply_lut(img, lut);
}

void solarize_add(Image& img, int add, int threshold) {
  Lut lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v < threshold ? std::clamp(v + add, 0, 255) : v);
  apply_lut(img, lut);
}

void autocontrast(Image& img) {
  check_image(img, "autocontrast");
  const auto hist = histograms(img);
  Lut luts[3];
  for (int64_t c = 0; c < img.channels; ++c) {
    const Histogram& h = hist[c];
    int lo = 0, hi = 255;
    while (lo < 255 && h[lo] == 0) ++lo;
    while (hi > 0 && h[hi] == 0) --hi;
    if (hi <= lo) {
      luts[c] = identity_lut();
      continue;
    }
    const double scale = 255.0 / (hi - lo);
    const double offset = -lo * scale;
    for (int v = 0; v < 256; ++v) {
      const int64_t m = static_cast<int64_t>(v * scale + offset);  // int() truncates towards zero
      luts[c][v] = static_cast<uint8_t>(std::clamp<int64_t>(m, 0, 255));
    }
  }
  apply_luts(img, luts);
}

void equalize(Image& img) {
  check_image(img, "equalize");
  const auto hist = histograms(img);
  Lut luts[3];
  for (int64_t c = 0; c < img.channels; ++c) {
    const Histogram& h = hist[c];
    int64_t total = 0, last = 0, used = 0;
    for (int64_t count : h) {
      if (count) {
        total += count;
        last = count;
        ++used;
      }
    }
    // ImageOps.equalize: step = (pixels - count of the highest used level) // 255.
    const int64_t step = used <= 1 ? 0 : (total - last) / 255;
    if (step == 0) {
      luts[c] = identity_lut();
      continue;
    }
    int64_t n = step / 2;
    for (int v = 0; v < 256; ++v) {
      luts[c][v] = static_cast<uint8_t>(std::min<int64_t>(n / step, 255));
      n += h[v];
    }
  }
  apply_luts(img, luts);
}

// ---- ImageEnhance --------------------------------------------------------------------------------

void enhance_brightness(Image& img, double factor) { apply_lut(img, blend_lut(0, factor)); }

void enhance_contrast(Image& img, double factor) {
  check_image(img, "enhance_contrast");
  // The degenerate image is the grey level int(mean(L) + 0.5) everywhere.
  int64_t sum = 0;
  const int64_t n = img.height * img.width;
  const uint8_t* p = img.pixels.data();
  if (img.channels == 1) {
    for (int64_t i = 0; i < n; ++i) sum += p[i];
  } else {
    for (int64_t i = 0; i < n; ++i, p += 3) sum += luma(p);
  }
  const int mean = static_cast<int>(static_cast<double>(sum) / static_cast<double>(n) + 0.5);
  apply_lut(img, blend_lut(mean, factor));
}

void enhance_color(Image& img, double factor) {
  check_image(img, "enhance_color");
  if (img.channels == 1) return;  // convert("L").convert("L") is the image itself
  const float alpha = static_cast<float>(factor);
  uint8_t* p = img.pixels.data();
  const int64_t n = img.height * img.width;
  for (int64_t i = 0; i < n; ++i, p += 3) {
    const int g = luma(p);
    for (int c = 0; c < 3; ++c) p[c] = blend_px(g, p[c], alpha);
  }
}

void enhance_sharpness(Image& img, double factor) {
  check_image(img, "enhance_sharpness");
  // Degenerate: ImageFilter.SMOOTH = [[1,1,1],[1,5,1],[1,1,1]] / 13, rounded; the border
  // pixels are left unfiltered, so they blend to themselves.
  const Image src = img;
  const float alpha = static_cast<float>(factor);
  const int64_t C = img.channels, stride = img.width * C;
  for (int64_t y = 1; y + 1 < img.height; ++y) {
    const uint8_t* up = src.at(y - 1, 0);
    const uint8_t* mid = src.at(y, 0);
    const uint8_t* dn = src.at(y + 1, 0);
    uint8_t* o = img.at(y, 0);
    for (int64_t e = C; e < stride - C; ++e) {
      const int s =
          up[e - C] + up[e] + up[e + C] + mid[e - C] + 5 * mid[e] + mid[e + C] + dn[e - C] + dn[e] + dn[e + C];
      const int smooth = (2 * s + 13) / 26;  // floor(s / 13 + 0.5); s / 13 is never a tie
      o[e] = blend_px(smooth, mid[e], alpha);
    }
  }
}

}  // namespace tessera::data
