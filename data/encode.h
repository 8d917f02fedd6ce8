// Writing images: PNG through stb_image_write (Debian's libstb-dev), for the maps and pictures the
// command-line tools produce (`tessera attention-map`).
#pragma once
#include <string>

#include "tessera/data/image.h"

namespace tessera::data {

// An 8-bit gray (1 channel) or RGB (3 channels) image as the bytes of a PNG file.
std::string encode_png(const Image& image);

// Writes an 8-bit gray (1 channel) or RGB (3 channels) image as PNG, atomically
// (core/atomic_file.h). Errors name the path.
void write_png(const std::string& path, const Image& image);

}  // namespace tessera::data
