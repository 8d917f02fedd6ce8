// PNG writing with stb_image_write; see data/encode.h. STB_IMAGE_WRITE_STATIC keeps stb's symbols
// local to this file, so tests that compile stb_image_write themselves link beside it.
#include "tessera/data/encode.h"

#include "tessera/core/atomic_file.h"
#include "tessera/core/error.h"

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

namespace tessera::data {

std::string encode_png(const Image& image) {
  TS_CHECK(!image.empty() && (image.channels == 1 || image.channels == 3) &&
               static_cast<int64_t>(image.pixels.size()) == image.height * image.width * image.channels,
           "encode_png: expected a non-empty 1- or 3-channel image, got ", image.height, "x", image.width, "x",
           image.channels);
  std::string png;
  const int ok = stbi_write_png_to_func(
      [](void* out, void* data, int size) { static_cast<std::string*>(out)->append(static_cast<char*>(data), size); },
      &png, static_cast<int>(image.width), static_cast<int>(image.height), static_cast<int>(image.channels),
      image.pixels.data(), static_cast<int>(image.width * image.channels));
  TS_CHECK(ok != 0, "encode_png: PNG encoding failed for a ", image.height, "x", image.width, " image");
  return png;
}

void write_png(const std::string& path, const Image& image) {
  // Encoded in memory, then written atomically: a reader never sees half a PNG.
  std::string png;
  try {
    png = encode_png(image);
  } catch (const Error& e) { throw Error("write_png: " + path + ": " + e.what()); }
  write_file_atomically(path, png);
}

}  // namespace tessera::data
