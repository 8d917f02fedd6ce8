// The pieces of a self-contained HTML page (`tessera explain`): text escaped for HTML, pictures as
// PNG data URIs (no file beside the page, no network), heat maps of a matrix, and SVG bar charts.
// Everything here is plain markup that reads with scripts off.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/data/image.h"

namespace tessera::cli {

// `text` with &, <, >, " and ' as entities.
std::string html_escape(std::string_view text);

// RFC 4648 base64 (with padding) of `bytes`.
std::string base64(std::string_view bytes);

// "data:image/png;base64,..." of a 1- or 3-channel image.
std::string png_data_uri(const data::Image& image);

// A 2-D tensor [rows, cols] as an RGB picture, one pixel per entry, in the blue -> green -> yellow
// -> red ramp of `tessera attention-map` from the map's minimum to its maximum (a constant map is
// all blue). The page scales it up.
data::Image heat_image(const Tensor& map);

// One bar of a chart: its label, its value and, for stacked bars, the parts (each a value and a
// CSS colour) that add up to it.
struct Bar {
  std::string label;
  double value = 0;
  std::vector<std::pair<double, std::string>> parts;
};

// A horizontal bar chart as inline SVG: one row per bar, labels on the left, the value printed
// after the bar with `unit` ("MMAC"). `width` is the SVG's width in CSS pixels.
std::string svg_bar_chart(const std::vector<Bar>& bars, const std::string& unit, int width = 640);

}  // namespace tessera::cli
