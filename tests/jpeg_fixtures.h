// JPEG files for the data tests: TurboJPEG encoding, and a pixel comparison.
#pragma once
#include <turbojpeg.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "tessera/data/image.h"

namespace tessera::testing {

// Encodes with TurboJPEG; `format` is TJPF_RGB, TJPF_GRAY or TJPF_CMYK (the pixels' layout).
inline std::string encode_jpeg(const data::Image& img, int format, int subsamp, int quality = 98) {
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, img.pixels.data(), static_cast<int>(img.width), 0, static_cast<int>(img.height),
                             format, &out, &size, subsamp, quality, 0);
  INFO(tjGetErrorStr2(tj));
  REQUIRE(rc == 0);
  std::string bytes(reinterpret_cast<const char*>(out), size);
  tjFree(out);
  tjDestroy(tj);
  return bytes;
}

inline int max_abs_diff(const data::Image& a, const data::Image& b) {
  REQUIRE(a.height == b.height);
  REQUIRE(a.width == b.width);
  REQUIRE(a.channels == b.channels);
  int d = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) d = std::max(d, std::abs(a.pixels[i] - b.pixels[i]));
  return d;
}

}  // namespace tessera::testing
