// Decoding only what the crop needs (data/encoded_image.h): JPEG headers read ahead, the strongest
// DCT-domain reduction that still covers the resample, the same crop boxes and random draws as a
// full decode, and pixels within measured bounds of it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>

#include "jpeg_fixtures.h"
#include "tessera/data/encode.h"
#include "tessera/data/encoded_image.h"
#include "tessera/data/pipeline.h"
#include "tessera/data/transforms.h"

using namespace tessera;
using namespace tessera::data;
using Catch::Contains;
using testing::encode_jpeg;
using testing::max_abs_diff;

namespace {

// A photograph-like test image: smooth shading, sharp edges and fine noise, so that the DCT holds
// energy at every frequency (a smooth pattern would make a reduced decode trivially exact).
Image textured(int64_t h, int64_t w) {
  Image img(h, w, 3);
  uint32_t state = 12345;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < 3; ++k) {
        state = state * 1664525u + 1013904223u;
        const double shade = 50.0 * std::sin(0.05 * static_cast<double>(x) + static_cast<double>(k)) *
                             std::cos(0.035 * static_cast<double>(y));
        const double edges = (x / 37 + y / 23) % 2 ? 35.0 : -35.0;
        const double noise = static_cast<double>((state >> 24) % 25) - 12.0;
        img.at(y, x)[k] = static_cast<uint8_t>(std::clamp(110.0 + shade + edges + noise, 0.0, 255.0));
      }
  return img;
}

// ImageNet's typical size and quality: 500x375, quality 90, 4:2:0.
const std::string& photo_jpeg() {
  static const std::string bytes = encode_jpeg(textured(375, 500), TJPF_RGB, TJSAMP_420, 90);
  return bytes;
}

// The largest and the mean absolute difference of two [C, H, W] tensors in 8-bit levels (the
// transforms below normalise with mean 0 and std 1, so a tensor holds pixel / 255).
struct Levels {
  double max = 0, mean = 0;
};
Levels level_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  Levels d;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = std::abs(static_cast<double>(x[i]) - y[i]) * 255.0;
    d.max = std::max(d.max, v);
    d.mean += v;
  }
  d.mean /= static_cast<double>(x.size());
  return d;
}

TransformOptions plain_options(bool training) {
  TransformOptions o;
  o.is_training = training;
  o.mean = {0, 0, 0};
  o.std = {1, 1, 1};
  return o;
}

}  // namespace

TEST_CASE("a JPEG's size comes from its header; its full decode is decode_image's", "[data][decode]") {
  const std::string& bytes = photo_jpeg();
  const EncodedImage e = EncodedImage::from_bytes(bytes, "photo.jpg", 3);
  CHECK(e.height() == 375);
  CHECK(e.width() == 500);
  const Image full = decode_image_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "photo.jpg");
  CHECK(max_abs_diff(e.decode(), full) == 0);

  // Other formats are decoded at once and never reduced.
  const EncodedImage png = EncodedImage::from_bytes(encode_png(full), "photo.png", 3);
  const EncodedImage::Reduced same = png.decode_for(Box{0, 0, 375, 500}, 16, 16);
  CHECK(same.scale == 1.0);
  CHECK(max_abs_diff(same.image, full) == 0);

  // Errors name the file: a corrupt header at once, a truncated body when decoded.
  CHECK_THROWS_AS(EncodedImage::from_bytes(bytes.substr(0, 40), "cut.jpg", 3), DataError);
  CHECK_THROWS_WITH(EncodedImage::from_bytes(bytes.substr(0, 40), "cut.jpg", 3), Contains("cut.jpg"));
  const EncodedImage truncated = EncodedImage::from_bytes(bytes.substr(0, bytes.size() / 2), "half.jpg", 3);
  CHECK(truncated.height() == 375);
  CHECK_THROWS_WITH(truncated.decode_for(Box{0, 0, 375, 500}, 224, 224), Contains("half.jpg") && Contains("truncated"));
}

TEST_CASE("decode_for takes the strongest reduction that keeps the region at least the output's size",
          "[data][decode]") {
  const EncodedImage e = EncodedImage::from_bytes(photo_jpeg(), "photo.jpg", 3);
  // 375 x 5/8 = 234.4 >= 224, 375 x 1/2 = 187.5 < 224: 5/8, each side rounded up.
  const EncodedImage::Reduced r = e.decode_for(Box{0, 0, 375, 500}, 224, 224);
  CHECK(r.scale == 0.625);
  CHECK(r.image.height == 235);
  CHECK(r.image.width == 313);
  // The width decides when it is the tighter side (the height alone would allow 1/4); of a region
  // of 40% of the image only the part around it is decoded: rows 0-187 (all), columns from 50.
  const EncodedImage::Reduced narrow = e.decode_for(Box{0, 100, 375, 200}, 90, 90);
  CHECK(narrow.scale == 0.5);
  CHECK(narrow.top == 0);
  CHECK(narrow.left <= 50);
  CHECK(narrow.left + narrow.image.width >= 150);
  CHECK(narrow.image.width < 250);
  // 7/8 is never used (it decodes slower than full size): 240 x 7/8 = 210 would cover 200.
  CHECK(e.decode_for(Box{50, 60, 240, 240}, 200, 200).scale == 1.0);
  // A region smaller than the output is decoded at full size; a tiny output takes 1/8.
  CHECK(e.decode_for(Box{0, 0, 100, 120}, 224, 224).scale == 1.0);
  const EncodedImage::Reduced eighth = e.decode_for(Box{0, 0, 375, 500}, 40, 40);
  CHECK(eighth.scale == 0.125);
  CHECK(eighth.image.height == 47);
  CHECK(eighth.image.width == 63);
  // An image in memory has nothing to reduce.
  const EncodedImage in_memory(textured(64, 64));
  CHECK(in_memory.decode_for(Box{0, 0, 64, 64}, 8, 8).scale == 1.0);
}

TEST_CASE("a JPEG decoded around a region has the whole decode's pixels there", "[data][decode]") {
  const Image rgb = textured(375, 500);
  Image gray(375, 500, 1);
  for (int64_t i = 0; i < 375 * 500; ++i) gray.pixels[i] = rgb.pixels[3 * i];
  struct File {
    const char* name;
    std::string bytes;
  };
  const File files[] = {{"4:2:0", encode_jpeg(rgb, TJPF_RGB, TJSAMP_420, 90)},
                        {"4:4:4", encode_jpeg(rgb, TJPF_RGB, TJSAMP_444, 90)},
                        {"gray", encode_jpeg(gray, TJPF_GRAY, TJSAMP_GRAY, 90)}};
  for (const File& f : files) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(f.bytes.data());
    for (const JpegScale scale :
         {JpegScale{1, 1}, JpegScale{3, 4}, JpegScale{5, 8}, JpegScale{1, 2}, JpegScale{1, 4}}) {
      const Image whole = decode_jpeg_memory(bytes, f.bytes.size(), f.name, scale);
      for (const Box& region :
           {Box{0, 0, 10, 10}, Box{whole.height / 5, whole.width / 7, whole.height / 2, whole.width / 3},
            Box{whole.height - 20, whole.width - 30, 20, 30}, Box{whole.height / 3, 0, 7, whole.width}}) {
        INFO(f.name << " at " << scale.num << "/" << scale.denom << ", region " << region.top << "," << region.left
                    << " " << region.height << "x" << region.width);
        const JpegRegion part = decode_jpeg_region(bytes, f.bytes.size(), f.name, scale, region);
        REQUIRE(part.top <= region.top);
        REQUIRE(part.left <= region.left);
        REQUIRE(part.top + part.image.height >= region.top + region.height);
        REQUIRE(part.left + part.image.width >= region.left + region.width);
        CHECK(max_abs_diff(
                  crop(part.image, {region.top - part.top, region.left - part.left, region.height, region.width}),
                  crop(whole, region)) == 0);
      }
    }
  }
  const std::string& photo = photo_jpeg();
  const auto* bytes = reinterpret_cast<const uint8_t*>(photo.data());
  CHECK_THROWS_WITH(decode_jpeg_region(bytes, photo.size(), "photo.jpg", JpegScale{1, 2}, Box{0, 0, 200, 10}),
                    Contains("not inside the 188x250 reduced image of photo.jpg"));
  CHECK_THROWS_WITH(decode_jpeg_region(bytes, photo.size() / 3, "cut.jpg", JpegScale{1, 1}, Box{300, 0, 10, 10}),
                    Contains("cut.jpg") && Contains("truncated"));
}

TEST_CASE("resized_crop_fractional with whole-pixel edges is resized_crop, bit for bit", "[data][transforms]") {
  const Image img = textured(61, 83);
  const Box out_region{3, 5, 20, 30};
  for (const Interpolation interp : {Interpolation::Bilinear, Interpolation::Bicubic}) {
    for (const Box& box : {Box{0, 0, 61, 83}, Box{7, 11, 40, 50}, Box{20, 30, 41, 53}}) {
      INFO(interpolation_name(interp) << " box " << box.top << "," << box.left << " " << box.height << "x"
                                      << box.width);
      const Window w{static_cast<double>(box.top), static_cast<double>(box.left), static_cast<double>(box.height),
                     static_cast<double>(box.width)};
      CHECK(max_abs_diff(resized_crop_fractional(img, w, 32, 36, interp), resized_crop(img, box, 32, 36, interp)) == 0);
      CHECK(max_abs_diff(resized_crop_fractional(img, w, 32, 36, interp, &out_region),
                         resized_crop(img, box, 32, 36, interp, &out_region)) == 0);
    }
  }
  // A window past the image is refused, naming it.
  CHECK_THROWS_WITH(resized_crop_fractional(img, Window{0, 0, 62.5, 10}, 8, 8, Interpolation::Bilinear),
                    Contains("not inside the 61x83 image"));
}

TEST_CASE("the training crop on a reduced decode: timm's boxes and draws, pixels within bounds of a full decode",
          "[data][transforms]") {
  const EncodedImage jpeg = EncodedImage::from_bytes(photo_jpeg(), "photo.jpg", 3);
  const EncodedImage full(jpeg.decode());
  const TransformOptions o = plain_options(true);  // RandomResizedCrop(224), flip, colour jitter
  const SampleTransform transform = create_transform(o);
  int reduced = 0;
  double worst_mean = 0, worst_max = 0;
  for (uint64_t index = 0; index < 48; ++index) {
    SampleRng a(7, 0, index), b(7, 0, index), box_rng(7, 0, index);
    const Box box = random_resized_crop_box(375, 500, o.scale, o.ratio, box_rng);
    const Levels d = level_diff(transform(jpeg, a), transform(full, b));
    CHECK(a.uniform() == b.uniform());  // the same draws, as many of them
    INFO("sample " << index << ": box " << box.height << "x" << box.width << ", max " << d.max << ", mean " << d.mean);
    if (box.height * 3 < 224 * 4 || box.width * 3 < 224 * 4) {
      CHECK(d.max == 0.0);  // no reduction covers the box: the full decode, exactly
      continue;
    }
    ++reduced;
    worst_mean = std::max(worst_mean, d.mean);
    worst_max = std::max(worst_max, d.max);
  }
  INFO("worst mean " << worst_mean << ", worst max " << worst_max << " levels");
  CHECK(reduced >= 8);
  // Bounds measured on this image, which is noise-heavy and so a hard case for a reduced IDCT
  // (docs/benchmarks.md): worst sample mean 2.5 levels, worst pixel 22 levels off.
  CHECK(worst_mean < 3.0);
  CHECK(worst_max <= 40.0);
}

TEST_CASE("the eval resize and center crop on a reduced decode stay within bounds of a full decode",
          "[data][transforms]") {
  const EncodedImage jpeg = EncodedImage::from_bytes(photo_jpeg(), "photo.jpg", 3);
  const EncodedImage full(jpeg.decode());
  // Resize 256 (224 / 0.875) then crop 224: 375 x 3/4 = 281 still covers the 256.
  CHECK(jpeg.decode_for(Box{0, 0, 375, 500}, 256, 341).scale == 0.75);
  const SampleTransform transform = create_transform(plain_options(false));
  SampleRng a(1, 0, 0), b(1, 0, 0);
  const Levels d = level_diff(transform(jpeg, a), transform(full, b));
  INFO("max " << d.max << ", mean " << d.mean);
  CHECK(d.mean > 0.0);  // it was reduced
  CHECK(d.mean < 2.0);  // measured: mean 1.56 levels, worst pixel 15
  CHECK(d.max <= 24.0);
}
