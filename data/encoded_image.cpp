// EncodedImage (see encoded_image.h): JPEG headers read ahead, pixels decoded at the reduction a
// resample needs.
#include "tessera/data/encoded_image.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace tessera::data {

EncodedImage::EncodedImage(Image decoded)
    : decoded_(std::move(decoded)), height_(decoded_.height), width_(decoded_.width) {}

EncodedImage EncodedImage::from_bytes(std::string bytes, std::string name, int64_t want_channels) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (!is_jpeg(data, bytes.size())) return EncodedImage(decode_image_memory(data, bytes.size(), name, want_channels));
  EncodedImage e;
  const auto [h, w] = jpeg_size(data, bytes.size(), name);
  e.height_ = h, e.width_ = w;
  e.jpeg_ = std::make_shared<const std::string>(std::move(bytes));
  e.name_ = std::move(name);
  e.want_channels_ = want_channels;
  return e;
}

Image EncodedImage::decode() const {
  if (!jpeg_) return decoded_;
  return decode_jpeg_memory(reinterpret_cast<const uint8_t*>(jpeg_->data()), jpeg_->size(), name_, JpegScale{},
                            want_channels_);
}

EncodedImage::Reduced EncodedImage::decode_for(const Box& region, int64_t out_h, int64_t out_w) const {
  if (!jpeg_) return {decoded_, 1.0, 0, 0};
  // libjpeg-turbo's reductions that pay. Its SIMD IDCTs cover full size and 1/2, 1/4, 1/8; the
  // other factors run plain C. Measured on 500x375 photographs (2-core Xeon VM, ms per image):
  // 1/1 0.96-1.09, 7/8 1.21-1.27, 3/4 1.00-1.15, 5/8 0.79-0.81, 1/2 0.44-0.52, 3/8 0.45-0.59,
  // 1/4 0.36-0.42, 1/8 0.29-0.38. 7/8 decodes slower than full size for 23% fewer pixels, and 3/8
  // no faster than 1/2: both are left out. 3/4 stays: it decodes as fast as full size and leaves
  // the resample 44% fewer pixels (the eval resize to 256 of a 375-pixel side is its case).
  static const std::vector<JpegScale> used = {{1, 1}, {3, 4}, {5, 8}, {1, 2}, {1, 4}, {1, 8}};
  JpegScale chosen;
  for (const JpegScale& s : used) {
    const double f = static_cast<double>(s.num) / s.denom;
    if (static_cast<double>(region.height) * f < static_cast<double>(out_h) ||
        static_cast<double>(region.width) * f < static_cast<double>(out_w))
      break;
    chosen = s;
  }
  const double f = static_cast<double>(chosen.num) / chosen.denom;
  const auto* bytes = reinterpret_cast<const uint8_t*>(jpeg_->data());
  // The region's whole pixels in the reduced image.
  const int64_t h = scaled_size(static_cast<int>(height_), chosen), w = scaled_size(static_cast<int>(width_), chosen);
  const int64_t top =
      std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(region.top) * f)), 0, h - 1);
  const int64_t left =
      std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(region.left) * f)), 0, w - 1);
  const int64_t bottom = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(static_cast<double>(region.top + region.height) * f)), top + 1, h);
  const int64_t right = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(static_cast<double>(region.left + region.width) * f)), left + 1, w);
  // A region of most of the image decodes whole (TurboJPEG, the same pixels): the partial decode
  // saves little there and pays for its margins.
  if (static_cast<double>((bottom - top) * (right - left)) > 0.8 * static_cast<double>(h * w))
    return {decode_jpeg_memory(bytes, jpeg_->size(), name_, chosen, want_channels_), f, 0, 0};
  JpegRegion part = decode_jpeg_region(bytes, jpeg_->size(), name_, chosen, Box{top, left, bottom - top, right - left},
                                       want_channels_);
  return {std::move(part.image), f, part.top, part.left};
}

}  // namespace tessera::data
