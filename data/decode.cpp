// Image decoding (see decode.h): magic-byte sniffing, TurboJPEG for JPEG, stb_image for the rest,
// then PIL-compatible channel conversion. This file holds the one stb_image implementation of the
// program (static functions, so a second copy elsewhere could not clash at link time).
#include "tessera/data/decode.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

#include <turbojpeg.h>

#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_JPEG   // JPEG goes through libjpeg-turbo: faster, and bit-identical to PIL's decode
#define STBI_NO_STDIO  // we read files ourselves (one error path, paths with any characters)
#include <stb_image.h>

namespace tessera::data {

namespace {

// What a raised pixel limit can still never exceed: 2^31 bytes is far beyond any training image,
// and keeps every size product within stb_image's int arithmetic.
constexpr int64_t kMaxDecodedBytes = int64_t{1} << 31;

std::atomic<int64_t> g_max_image_pixels{kDefaultMaxImagePixels};

std::string hex_prefix(const uint8_t* bytes, size_t n) {
  std::string s;
  char buf[4];
  for (size_t i = 0; i < n && i < 4; ++i) {
    std::snprintf(buf, sizeof buf, i ? " %02x" : "%02x", bytes[i]);
    s += buf;
  }
  return s;
}

// a * b / 255 rounded, with PIL's integer trick (MULDIV255 in Pillow's Convert.c).
inline int mul_div255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// ITU-R 601 luma with PIL's 16-bit fixed-point rounding (convert('L')).
inline uint8_t luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

struct TjDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};

// One decompressor per thread: creating one costs an allocation of a few KB per image otherwise.
tjhandle thread_decompressor() {
  thread_local std::unique_ptr<void, TjDeleter> handle(tjInitDecompress());
  if (!handle) throw DataError("decode_image: cannot create a libjpeg-turbo decompressor");
  return handle.get();
}

// Called between reading a header and allocating its pixels; h and w come from 32-bit fields.
void check_size(int64_t h, int64_t w, int64_t c, const std::string& name, const char* format) {
  if (h <= 0 || w <= 0 || c <= 0)
    throw DataError(
        detail::concat(name, ": corrupt or unsupported ", format, " header (image size ", w, "x", h, "x", c, ")"));
  const int64_t limit = max_image_pixels();
  if (h * w > limit)
    throw DataError(detail::concat(name, ": the ", format, " header claims ", w, "x", h, " = ", h * w,
                                   " pixels, more than the limit of ", limit,
                                   " (a decompression bomb? raise it with --max-image-pixels)"));
  if (h * w * c > kMaxDecodedBytes)
    throw DataError(detail::concat(name, ": the ", format, " header claims ", w, "x", h, "x", c,
                                   " bytes of pixels, more than ", kMaxDecodedBytes, " whatever the pixel limit"));
}

void check_want_channels(int64_t want_channels) {
  TS_CHECK(want_channels == 0 || want_channels == 1 || want_channels == 3,
           "decode_image: want_channels must be 0 (keep), 1 (gray) or 3 (RGB), got ", want_channels);
}

struct JpegHeaderInfo {
  int width = 0, height = 0, format = TJPF_RGB;
};

JpegHeaderInfo read_jpeg_header(tjhandle tj, const uint8_t* bytes, size_t n, const std::string& name) {
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, bytes, static_cast<unsigned long>(n), &width, &height, &subsamp, &colorspace) != 0)
    throw DataError(name + ": corrupt JPEG (libjpeg-turbo: " + tjGetErrorStr2(tj) + ")");
  const int format = colorspace == TJCS_GRAY                              ? TJPF_GRAY
                     : colorspace == TJCS_CMYK || colorspace == TJCS_YCCK ? TJPF_CMYK
                                                                          : TJPF_RGB;
  // The bomb guard reads the full size, whatever reduction the decode then applies.
  check_size(height, width, tjPixelSize[format], name, "JPEG");
  return {width, height, format};
}

Image decode_jpeg(const uint8_t* bytes, size_t n, const std::string& name, JpegScale scale = {}) {
  tjhandle tj = thread_decompressor();
  const unsigned long len = static_cast<unsigned long>(n);
  const JpegHeaderInfo h = read_jpeg_header(tj, bytes, n, name);
  const int width = scaled_size(h.width, scale), height = scaled_size(h.height, scale);
  Image img(height, width, tjPixelSize[h.format]);
  // flags 0: accurate integer IDCT and fancy upsampling, libjpeg's defaults, as PIL decodes. A
  // reduced size selects libjpeg-turbo's scaled IDCT of that factor.
  if (tjDecompress2(tj, bytes, len, img.pixels.data(), width, 0, height, h.format, 0) != 0) {
    const std::string why = tjGetErrorStr2(tj);
    // libjpeg reports recoverable damage as warnings. PIL refuses a truncated file ("image file is
    // truncated") and accepts the rest (e.g. extraneous bytes before a marker), so do we.
    const bool truncated = why.find("Premature end of JPEG file") != std::string::npos;
    if (tjGetErrorCode(tj) != TJERR_WARNING || truncated)
      throw DataError(name + ": " + (truncated ? "truncated" : "corrupt") + " JPEG (libjpeg-turbo: " + why + ")");
  }
  return h.format == TJPF_CMYK ? cmyk_to_rgb(img) : img;
}

// stb_image 2.27 (Debian 12's) reads the numbers of a binary PNM header (P5, P6) into an int with
// no overflow check, which is undefined behaviour (2.28 added the check; found by fuzz/fuzz_png).
// A header number of more than 9 digits is refused here first: no real image is that large.
void check_pnm_header(const uint8_t* bytes, size_t n, const std::string& name) {
  if (n < 2 || bytes[0] != 'P' || (bytes[1] != '5' && bytes[1] != '6')) return;
  const auto space = [](uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  size_t i = 2;
  for (const char* field : {"width", "height", "maximum value"}) {
    while (i < n && (space(bytes[i]) || bytes[i] == '#')) {  // stb skips whitespace and # comments
      if (bytes[i] == '#')
        while (i < n && bytes[i] != '\n' && bytes[i] != '\r') ++i;
      else ++i;
    }
    const size_t start = i;
    while (i < n && bytes[i] >= '0' && bytes[i] <= '9') ++i;
    if (i - start > 9)
      throw DataError(detail::concat(name, ": corrupt PNM header (its ", field, " has ", i - start, " digits)"));
  }
}

// stb_image grows its buffer for a PNG's IDAT chunks to the length each chunk claims before
// reading it, so a 100-byte file claiming a 2 GB chunk allocates 2 GB (found by fuzz/fuzz_png).
// Every chunk's claimed length is checked against the bytes present first.
void check_png_chunks(const uint8_t* bytes, size_t n, const std::string& name) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (n < 8 || std::memcmp(bytes, kSignature, 8) != 0) return;
  size_t at = 8;
  while (n - at >= 8) {  // length and type
    const uint64_t length = (uint64_t{bytes[at]} << 24) | (uint64_t{bytes[at + 1]} << 16) |
                            (uint64_t{bytes[at + 2]} << 8) | uint64_t{bytes[at + 3]};
    const std::string type(reinterpret_cast<const char*>(bytes + at + 4), 4);
    const uint64_t remaining = n - at - 8;
    if (length + 4 > remaining)  // the data and the CRC
      throw DataError(detail::concat(name, ": truncated PNG: chunk '", type, "' at byte ", at, " claims ", length,
                                     " bytes of data, ", remaining < 4 ? 0 : remaining - 4, " remain"));
    if (type == "IEND") return;
    at += 12 + length;
  }
}

Image decode_stb(const uint8_t* bytes, size_t n, const std::string& name) {
  if (n > static_cast<size_t>(INT_MAX)) throw DataError(name + ": file too large for stb_image");
  check_pnm_header(bytes, n, name);
  check_png_chunks(bytes, n, name);
  const int len = static_cast<int>(n);
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(bytes, len, &width, &height, &channels))
    throw DataError(name + ": not a supported image (first bytes " + hex_prefix(bytes, n) +
                    "; stb_image: " + stbi_failure_reason() + ")");
  check_size(height, width, channels, name, "image");
  std::unique_ptr<stbi_uc, void (*)(void*)> data(stbi_load_from_memory(bytes, len, &width, &height, &channels, 0),
                                                 stbi_image_free);
  if (!data) throw DataError(name + ": corrupt image (stb_image: " + stbi_failure_reason() + ")");
  Image img(height, width, channels);
  std::memcpy(img.pixels.data(), data.get(), img.pixels.size());
  return img;
}

}  // namespace

// A stored byte s means ink 255 - s; PIL converts with R = (255 - K) - C (255 - K) / 255, which in
// stored values is R = sK - (255 - sC) sK / 255.
Image cmyk_to_rgb(const Image& cmyk) {
  Image out(cmyk.height, cmyk.width, 3);
  const int64_t n = cmyk.height * cmyk.width;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* s = cmyk.pixels.data() + 4 * i;
    uint8_t* d = out.pixels.data() + 3 * i;
    const int k = s[3];
    for (int c = 0; c < 3; ++c) d[c] = static_cast<uint8_t>(k - mul_div255(255 - s[c], k));
  }
  return out;
}

bool is_jpeg(const uint8_t* bytes, size_t n) {
  return n >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

std::array<int64_t, 2> jpeg_size(const uint8_t* bytes, size_t n, const std::string& name) {
  const JpegHeaderInfo h = read_jpeg_header(thread_decompressor(), bytes, n, name);
  return {h.height, h.width};
}

Image decode_jpeg_memory(const uint8_t* bytes, size_t n, const std::string& name, JpegScale scale,
                         int64_t want_channels) {
  check_want_channels(want_channels);
  TS_CHECK(scale.num >= 1 && scale.denom >= scale.num, "decode_jpeg_memory: expected a reduction num/denom <= 1, got ",
           scale.num, "/", scale.denom);
  if (!is_jpeg(bytes, n)) throw DataError(name + ": not a JPEG (first bytes " + hex_prefix(bytes, n) + ")");
  return convert_channels(decode_jpeg(bytes, n, name, scale), want_channels, name);
}

int64_t max_image_pixels() { return g_max_image_pixels.load(std::memory_order_relaxed); }

void set_max_image_pixels(int64_t pixels) {
  TS_CHECK(pixels >= 1, "set_max_image_pixels: the limit must be at least 1 pixel, got ", pixels);
  g_max_image_pixels.store(pixels, std::memory_order_relaxed);
}

Image convert_channels(Image src, int64_t want_channels, const std::string& what) {
  check_want_channels(want_channels);
  const int64_t c = src.channels;
  if (c < 1 || c > 4) throw DataError(detail::concat(what, ": images with ", c, " channels are not supported"));
  const int64_t target = want_channels != 0 ? want_channels : (c <= 2 ? 1 : 3);
  if (c == target) return src;
  Image out(src.height, src.width, target);
  const int64_t n = src.height * src.width;
  const uint8_t* s = src.pixels.data();
  uint8_t* d = out.pixels.data();
  for (int64_t i = 0; i < n; ++i, s += c, d += target) {
    if (target == 1) {
      d[0] = c <= 2 ? s[0] : luma(s);  // gray(+alpha) keeps gray; RGB(A) -> luma, alpha dropped
    } else if (c <= 2) {
      d[0] = d[1] = d[2] = s[0];  // gray(+alpha) -> RGB replicates
    } else {
      d[0] = s[0], d[1] = s[1], d[2] = s[2];  // RGBA -> RGB drops alpha (PIL does not composite)
    }
  }
  return out;
}

Image decode_image_memory(const uint8_t* bytes, size_t n, const std::string& name_for_errors, int64_t want_channels) {
  check_want_channels(want_channels);
  if (n == 0) throw DataError(name_for_errors + ": empty file");
  const bool jpeg = is_jpeg(bytes, n);
  Image img = jpeg ? decode_jpeg(bytes, n, name_for_errors) : decode_stb(bytes, n, name_for_errors);
  return convert_channels(std::move(img), want_channels, name_for_errors);
}

std::string read_file_bytes(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) throw DataError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string bytes;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.append(buf, got);
  if (std::ferror(f.get())) throw DataError(path + ": read error (" + std::strerror(errno) + ")");
  return bytes;
}

Image decode_image(const std::string& path, int64_t want_channels) {
  check_want_channels(want_channels);
  const std::string bytes = read_file_bytes(path);
  return decode_image_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path, want_channels);
}

}  // namespace tessera::data
