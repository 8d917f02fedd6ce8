// A sample's image before it is decoded: its size, from the file's header, and its pixels on
// demand, at full size or — for a JPEG — reduced in libjpeg-turbo's DCT domain and only around
// the crop, so that a crop about to be resampled to 224x224 is not first decoded at 8 megapixels. The transforms
// (data/pipeline.h) choose the crop from the header's size, exactly as from the decoded image's,
// then ask for the fewest pixels that still cover it at the output's size: the crop boxes and the
// random draws are those of a full decode; only the pixels differ, by what the reduced IDCT
// rounds differently (measured in tests/test_encoded_image.cpp, docs/benchmarks.md).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/data/decode.h"
#include "tessera/data/image.h"
#include "tessera/data/image_ops.h"

namespace tessera::data {

class EncodedImage {
 public:
  // An image in memory (decoded already, or raw pixels as MNIST and CIFAR hold them): its own
  // encoding, with nothing left to reduce. Implicit, so that a transform takes an Image as it is.
  EncodedImage(Image decoded);  // NOLINT(google-explicit-constructor)
  // A file's bytes: a JPEG's header is read now (DataError naming `name` when it is corrupt or
  // over the pixel limit) and its pixels on demand; any other format is decoded now.
  static EncodedImage from_bytes(std::string bytes, std::string name, int64_t want_channels);

  int64_t height() const { return height_; }
  int64_t width() const { return width_; }

  // The full-size image (decode_image's result).
  Image decode() const;

  // The pixels a resample of `region` (a box of the full-size image) to out_h x out_w needs: the
  // image reduced by the strongest JPEG reduction that keeps the region at least out_h x out_w
  // (none when no reduction does, or for other formats), among the reductions that decode faster
  // than a milder one or leave far fewer pixels: 3/4, 5/8, 1/2, 1/4, 1/8 (the .cpp has the
  // measurements that left 7/8 and 3/8 out); and of a JPEG only the part around the region, when
  // the region leaves out a good part of the image (decode_jpeg_region). `image`'s pixel (0, 0) is
  // pixel (top, left) of the image reduced by `scale`, which maps full-size coordinates onto the
  // reduced image as x -> x * scale (exactly: the reduced IDCT decodes each 8-pixel block to
  // 8 * scale pixels).
  struct Reduced {
    Image image;
    double scale = 1.0;
    int64_t top = 0, left = 0;
  };
  Reduced decode_for(const Box& region, int64_t out_h, int64_t out_w) const;

 private:
  EncodedImage() = default;
  std::shared_ptr<const std::string> jpeg_;  // a JPEG's bytes, or null when decoded_ holds the image
  std::string name_;
  int64_t want_channels_ = 3;
  Image decoded_;
  int64_t height_ = 0, width_ = 0;
};

}  // namespace tessera::data
