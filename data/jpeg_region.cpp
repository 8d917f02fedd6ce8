// decode_jpeg_region (decode.h): a JPEG decoded reduced and only around a region, through
// libjpeg's own API (libjpeg-turbo's, Debian's libjpeg62-turbo-dev): TurboJPEG 2.1's API, which
// decode.cpp uses for whole images, has no partial decoding. The same decoder and settings
// (accurate integer IDCT, fancy upsampling) as a whole decode, so the region's pixels are the
// whole decode's (tests/test_encoded_image.cpp compares them).
//
// libjpeg reports errors through a callback that must not return: it longjmps out of the library.
// Only trivially destructible objects live in the frames it jumps over (the C structures and raw
// pointers of decode_rows below); the C++ objects stay in decode_jpeg_region.
#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <cstring>
#include <string>

#include <jpeglib.h>
// (after jpeglib.h, which it needs)
#include <jerror.h>

#include "tessera/data/decode.h"

namespace tessera::data {

namespace {

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;  // libjpeg warned that the data ended early (it pads the rest with gray)
};

void on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) are damage libjpeg recovered from; PIL refuses a truncated file and accepts
// the rest, as decode.cpp's whole decode does. Trace messages (level >= 0) are ignored.
void on_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (cinfo->err->msg_code == JWRN_JPEG_EOF && !e->truncated) {
    e->truncated = true;
    (*cinfo->err->format_message)(cinfo, e->message);
  }
}

// The rows and columns a decode delivers: set by decode_rows.
struct Delivered {
  JDIMENSION top, left, width, height, channels;
};

// Decodes rows [top, top + height) of the image reduced by scale, columns from `left` for
// `width` (widened by libjpeg to whole iMCUs: `got` says which), into `out` (room for height rows
// of the reduced image's full width). Returns false with e->message set on an error.
bool decode_rows(jpeg_decompress_struct* cinfo, ErrorManager* e, const uint8_t* bytes, size_t n, JpegScale scale,
                 JDIMENSION top, JDIMENSION left, JDIMENSION width, JDIMENSION height, uint8_t* out, Delivered* got) {
  if (setjmp(e->jump)) return false;
  jpeg_mem_src(cinfo, bytes, static_cast<unsigned long>(n));
  jpeg_read_header(cinfo, TRUE);
  cinfo->scale_num = static_cast<unsigned>(scale.num);
  cinfo->scale_denom = static_cast<unsigned>(scale.denom);
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->out_color_space = cinfo->jpeg_color_space == JCS_GRAYSCALE                                     ? JCS_GRAYSCALE
                           : cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK ? JCS_CMYK
                                                                                                        : JCS_RGB;
  jpeg_start_decompress(cinfo);
  JDIMENSION x = left, w = width;
  if (x != 0 || w != cinfo->output_width) jpeg_crop_scanline(cinfo, &x, &w);
  if (top > 0) jpeg_skip_scanlines(cinfo, top);
  const JDIMENSION stride = w * static_cast<JDIMENSION>(cinfo->output_components);
  for (JDIMENSION row = 0; row < height;) {
    JSAMPROW rows[1] = {out + static_cast<size_t>(row) * stride};
    row += jpeg_read_scanlines(cinfo, rows, 1);
  }
  *got = {top, x, w, height, static_cast<JDIMENSION>(cinfo->output_components)};
  jpeg_abort_decompress(cinfo);  // the rows below the region are never decoded
  return true;
}

}  // namespace

JpegRegion decode_jpeg_region(const uint8_t* bytes, size_t n, const std::string& name, JpegScale scale,
                              const Box& region, int64_t want_channels) {
  TS_CHECK(scale.num >= 1 && scale.denom >= scale.num, "decode_jpeg_region: expected a reduction num/denom <= 1, got ",
           scale.num, "/", scale.denom);
  if (!is_jpeg(bytes, n)) throw DataError(name + ": not a JPEG");
  const auto [full_h, full_w] = jpeg_size(bytes, n, name);  // and the pixel limit
  const int64_t h = scaled_size(static_cast<int>(full_h), scale), w = scaled_size(static_cast<int>(full_w), scale);
  TS_CHECK(region.height > 0 && region.width > 0 && region.top >= 0 && region.left >= 0 &&
               region.top + region.height <= h && region.left + region.width <= w,
           "decode_jpeg_region: region (top ", region.top, ", left ", region.left, ", height ", region.height,
           ", width ", region.width, ") is not inside the ", h, "x", w, " reduced image of ", name);
  // A margin of one iMCU around the region: upsampling reads the neighbours of each pixel, so the
  // region's own pixels come out as a whole decode makes them.
  constexpr int64_t kMargin = 16;
  const int64_t top = std::max<int64_t>(0, region.top - kMargin);
  const int64_t bottom = std::min(h, region.top + region.height + kMargin);
  const int64_t left = std::max<int64_t>(0, region.left - kMargin);
  const int64_t right = std::min(w, region.left + region.width + kMargin);
  std::string buffer(static_cast<size_t>((bottom - top) * w * 4), '\0');  // room for full rows of CMYK
  jpeg_decompress_struct cinfo;
  ErrorManager e;
  std::memset(&e, 0, sizeof e);
  cinfo.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = on_error;
  e.pub.emit_message = on_message;
  jpeg_create_decompress(&cinfo);
  Delivered got{};
  const bool ok = decode_rows(&cinfo, &e, bytes, n, scale, static_cast<JDIMENSION>(top), static_cast<JDIMENSION>(left),
                              static_cast<JDIMENSION>(right - left), static_cast<JDIMENSION>(bottom - top),
                              reinterpret_cast<uint8_t*>(buffer.data()), &got);
  jpeg_destroy_decompress(&cinfo);
  if (!ok || e.truncated)
    throw DataError(name + ": " + (ok ? "truncated" : "corrupt") + " JPEG (libjpeg-turbo: " + e.message + ")");
  Image img(static_cast<int64_t>(got.height), static_cast<int64_t>(got.width), static_cast<int64_t>(got.channels));
  std::memcpy(img.pixels.data(), buffer.data(), img.pixels.size());
  return {convert_channels(got.channels == 4 ? cmyk_to_rgb(img) : std::move(img), want_channels, name),
          static_cast<int64_t>(got.top), static_cast<int64_t>(got.left)};
}

}  // namespace tessera::data
