// Pieces of a self-contained HTML page; see tools/cli/html_figures.h.
#include "tools/cli/html_figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessera/data/encode.h"
#include "tools/cli/attention_picture.h"

namespace tessera::cli {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                       static_cast<uint8_t>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string png_data_uri(const data::Image& image) {
  return "data:image/png;base64," + base64(data::encode_png(image));
}

data::Image heat_image(const Tensor& map) {
  TS_CHECK(map.defined() && map.dim() == 2 && map.numel() > 0,
           "heat_image: expected a non-empty map [rows, cols], got ", map.defined() ? map.shape() : Shape{});
  const Tensor m = map.to(Device::cpu()).to(DType::Float32).contiguous();
  const float* a = m.data<float>();
  const auto [lo_it, hi_it] = std::minmax_element(a, a + m.numel());
  const double lo = *lo_it, hi = *hi_it;
  data::Image out(m.size(0), m.size(1), 3);
  for (int64_t i = 0; i < m.numel(); ++i) {
    const auto c = heat_color(hi > lo ? (a[i] - lo) / (hi - lo) : 0.0);
    for (int k = 0; k < 3; ++k) out.pixels[i * 3 + k] = static_cast<uint8_t>(std::lround(255.0 * c[k]));
  }
  return out;
}

namespace {

std::string svg_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), std::abs(v) >= 100 || v == std::floor(v) ? "%.0f" : "%.3g", v);
  return buf;
}

}  // namespace

std::string svg_bar_chart(const std::vector<Bar>& bars, const std::string& unit, int width) {
  constexpr int kRow = 18, kLabel = 170, kValue = 90;
  double top = 0;
  for (const Bar& b : bars) top = std::max(top, b.value);
  const double scale = top > 0 ? (width - kLabel - kValue) / top : 0;
  const int height = kRow * static_cast<int>(bars.size()) + 4;
  std::string s = "<svg class=\"chart\" width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
                  "\" role=\"img\">";
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const int y = static_cast<int>(i) * kRow + 2;
    s += "<text x=\"" + std::to_string(kLabel - 6) + "\" y=\"" + std::to_string(y + 13) + "\" text-anchor=\"end\">" +
         html_escape(b.label) + "</text>";
    double x = kLabel;
    const std::vector<std::pair<double, std::string>> parts =
        b.parts.empty() ? std::vector<std::pair<double, std::string>>{{b.value, "#4a78b5"}} : b.parts;
    for (const auto& [v, colour] : parts) {
      s += "<rect x=\"" + svg_number(x) + "\" y=\"" + std::to_string(y + 2) + "\" width=\"" + svg_number(v * scale) +
           "\" height=\"" + std::to_string(kRow - 5) + "\" fill=\"" + colour + "\"/>";
      x += v * scale;
    }
    s += "<text x=\"" + svg_number(x + 4) + "\" y=\"" + std::to_string(y + 13) + "\">" + svg_number(b.value) + " " +
         html_escape(unit) + "</text>";
  }
  return s + "</svg>";
}

}  // namespace tessera::cli
