// Image decoding: file bytes -> 8-bit HWC Image (data/image.h). The format is sniffed from the
// magic bytes, never from the file extension (ImageNet ships a PNG named .JPEG and CMYK JPEGs):
// JPEG goes through libjpeg-turbo's TurboJPEG API, everything else (PNG, BMP, GIF, TGA, PNM, PSD,
// HDR, PIC) through stb_image. The colour conversions follow PIL, which is what timm/torchvision
// feed their transforms: convert('RGB') drops alpha and replicates gray, convert('L') is ITU-R 601
// luma, and CMYK JPEGs are read with Adobe's inverted-ink convention.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/core/error.h"
#include "tessera/data/image.h"
#include "tessera/data/image_ops.h"

namespace tessera::data {

// A sample that cannot be read: corrupt, truncated or unsupported file, or a dataset item out of
// range. The message names the file (or "file.idx[123]") and the reason. The loader skips samples
// that throw this (or stops on them with --strict-data); any other exception is a program error.
class DataError : public Error {
 public:
  using Error::Error;
};

// Decompression-bomb guard (as PIL's Image.MAX_IMAGE_PIXELS): an image whose header claims more
// pixels than this is refused before its pixels are allocated, with a DataError naming the file,
// the claimed size and the limit. The default, 178,956,970 pixels, is where PIL refuses to open
// an image (DecompressionBombError above twice its MAX_IMAGE_PIXELS, 89,478,485 = 1 GiB / 4 / 3);
// `tessera` commands take --max-image-pixels. Process-wide; may be set from any thread.
inline constexpr int64_t kDefaultMaxImagePixels = 178'956'970;
int64_t max_image_pixels();
void set_max_image_pixels(int64_t pixels);  // >= 1

// Decodes the image file at `path`. want_channels: 3 -> RGB (gray replicated, alpha dropped),
// 1 -> gray (RGB -> L = (19595 R + 38470 G + 7471 B + 2^15) >> 16, PIL's rounding of
// 0.299 R + 0.587 G + 0.114 B), 0 -> the file's own: 1 for gray (with or without alpha), else 3.
// Throws DataError naming the path and the decoder's reason.
Image decode_image(const std::string& path, int64_t want_channels = 3);

// The same from bytes in memory; `name_for_errors` is what the messages call the data.
Image decode_image_memory(const uint8_t* bytes, size_t n, const std::string& name_for_errors,
                          int64_t want_channels = 3);

// A reduction of JPEG decoding in the DCT domain: the image comes out num/denom of its size on
// each axis, rounded up (libjpeg-turbo's scaled IDCT decodes each 8x8 block to num x num pixels);
// 1/1 is the full decode, bit-identical to PIL's.
struct JpegScale {
  int num = 1, denom = 1;
};
inline int scaled_size(int size, JpegScale s) { return (size * s.num + s.denom - 1) / s.denom; }

// Whether the bytes start as a JPEG does (FF D8 FF); the format is never taken from a file name.
bool is_jpeg(const uint8_t* bytes, size_t n);
// A JPEG's {height, width} from its header alone (the pixel limit checked); DataError naming
// `name` when the header is corrupt.
std::array<int64_t, 2> jpeg_size(const uint8_t* bytes, size_t n, const std::string& name);
// decode_image_memory of a JPEG reduced by `scale` (num/denom <= 1).
Image decode_jpeg_memory(const uint8_t* bytes, size_t n, const std::string& name, JpegScale scale,
                         int64_t want_channels = 3);

// A JPEG decoded reduced by `scale` and only around `region` (a box of the reduced image): libjpeg
// skips the IDCT of the rows above (jpeg_skip_scanlines), never decodes the rows below, and
// limits the columns (jpeg_crop_scanline, widened to whole iMCUs). The image returned covers the
// region and a margin, starting at pixel (top, left) of the reduced image, and its pixels are the
// whole decode's (data/jpeg_region.cpp). A file truncated below the region decodes without error.
struct JpegRegion {
  Image image;
  int64_t top = 0, left = 0;
};
JpegRegion decode_jpeg_region(const uint8_t* bytes, size_t n, const std::string& name, JpegScale scale,
                              const Box& region, int64_t want_channels = 3);

// CMYK as stored by Adobe applications (and assumed by PIL for every CMYK JPEG), inverted, to RGB
// as PIL's convert("RGB") does.
Image cmyk_to_rgb(const Image& cmyk);

// Converts an 8-bit image with 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA) interleaved
// channels to want_channels (1, 3, or 0 as above) with the rules of decode_image. `what` names the
// source in error messages. Datasets with raw pixels (MNIST, CIFAR) use it too.
Image convert_channels(Image src, int64_t want_channels, const std::string& what);

// Reads a whole file into memory; throws DataError naming the path when it cannot.
std::string read_file_bytes(const std::string& path);

}  // namespace tessera::data
