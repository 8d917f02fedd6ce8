// An 8-bit image in memory as decoders produce it: height x width x channels, row-major,
// interleaved (HWC). Datasets hand these to the transforms (data/transforms.h), which turn them
// into float CHW tensors at the very end of the pipeline.
#pragma once
#include <cstdint>
#include <vector>

namespace tessera::data {

struct Image {
  int64_t height = 0, width = 0, channels = 0;  // channels: 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;                  // height * width * channels bytes

  Image() = default;
  Image(int64_t h, int64_t w, int64_t c) : height(h), width(w), channels(c), pixels(h * w * c) {}
  uint8_t* at(int64_t y, int64_t x) { return pixels.data() + (y * width + x) * channels; }
  const uint8_t* at(int64_t y, int64_t x) const { return pixels.data() + (y * width + x) * channels; }
  bool empty() const { return pixels.empty(); }
};

}  // namespace tessera::data
