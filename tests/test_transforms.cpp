// The augmentation half of the data pipeline: image primitives (data/image_ops.h), transforms
// (data/transforms.h), RandAugment (data/rand_augment.h), Mixup/CutMix (data/mixup.h) and
// create_transform (data/pipeline.h).
//
// Reference outputs come from Pillow 9.4, torchvision 0.14 and timm 1.0.31
// (tests/data/transform_refs.safetensors, written by tools/gen_transform_refs.py; its docstring
// lists every entry and the exact call that made it). Resampling, affine warps, the RandAugment
// ops, ImageEnhance and the eval pipeline are required to match them exactly: the
// implementation reproduces Pillow's fixed-point and float arithmetic rather than approximating
// it. Random transforms are checked for their parameter distributions, invariants and
// determinism under SampleRng.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gradcheck.h"
#include "tessera/data/mixup.h"
#include "tessera/data/pipeline.h"
#include "tessera/data/rand_augment.h"
#include "tessera/data/transforms.h"
#include "tessera/io/safetensors.h"

using namespace tessera;
using namespace tessera::data;
using Catch::Contains;

namespace {

const SafetensorsReader& refs() {
  static const SafetensorsReader reader(std::string(TESSERA_TEST_DATA_DIR) + "/transform_refs.safetensors");
  return reader;
}

// An 8-bit image stored as F16 [H, W, C].
Image ref_image(const std::string& name) {
  const Tensor t = refs().load(name);
  REQUIRE(t.dim() == 3);
  Image img(t.size(0), t.size(1), t.size(2));
  const std::vector<float> v = t.to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) img.pixels[i] = static_cast<uint8_t>(v[i]);
  return img;
}

// Number of bytes that differ (images of different shapes count as all different).
int64_t count_diff(const Image& a, const Image& b) {
  if (a.height != b.height || a.width != b.width || a.channels != b.channels) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) n += a.pixels[i] != b.pixels[i];
  return n;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0, end;
  while ((end = s.find(sep, begin)) != std::string::npos) {
    parts.push_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  parts.push_back(s.substr(begin));
  return parts;
}

std::vector<std::string> names_with_prefix(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& n : refs().names()) {
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  return out;
}

// A deterministic test image with gradients and noise.
Image test_image(int64_t h, int64_t w, int64_t c, uint64_t seed = 7) {
  Image img(h, w, c);
  SampleRng rng(seed, 0, 0);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t k = 0; k < c; ++k) {
        const double v = (k == 0 ? 255.0 * x / w : k == 1 ? 255.0 * y / h : 128.0) + rng.normal(0, 30);
        img.at(y, x)[k] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return img;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  float m = 0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

constexpr Fill kFill = {124, 116, 104};  // the fill colour of the reference ops

Tensor labels(const std::vector<int64_t>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

}  // namespace

// ---- image primitives vs Pillow ---------------------------------------------------------------------

TEST_CASE("resize is bit-identical to PIL Image.resize, bilinear and bicubic, up and down", "[transforms]") {
  const auto names = names_with_prefix("resize.");
  REQUIRE(names.size() == 10);
  for (const auto& name : names) {
    const auto parts = split(name, '.');  // resize.<src>.<interp>.<h>x<w>
    const Image src = ref_image("src." + parts[1]);
    const Image expected = ref_image(name);
    const Image out = resize(src, expected.height, expected.width, parse_interpolation(parts[2]));
    INFO(name);
    CHECK(count_diff(out, expected) == 0);
  }
}

TEST_CASE("resized_crop with an output region equals the full resize cropped", "[transforms]") {
  const Image img = test_image(45, 61, 3);
  for (auto interp : {Interpolation::Bilinear, Interpolation::Bicubic}) {
    for (auto [oh, ow] : {std::pair<int64_t, int64_t>{30, 20}, {45, 90}, {100, 61}, {12, 61}}) {
      const Box window{3, 5, 37, 50};
      const Image full = resized_crop(img, window, oh, ow, interp);
      const Box region{oh / 4, ow / 3, oh / 2, ow / 2};
      const Image part = resized_crop(img, window, oh, ow, interp, &region);
      INFO(oh << "x" << ow);
      CHECK(count_diff(part, crop(full, region)) == 0);
      // The window is treated as the whole image (torchvision crops before resizing).
      CHECK(count_diff(full, resize(crop(img, window), oh, ow, interp)) == 0);
    }
  }
  CHECK(count_diff(resize(img, 45, 61, Interpolation::Bicubic), img) == 0);  // same size: a copy
}

TEST_CASE("RandAugment ops match timm's op functions on PIL images at a fixed magnitude and sign", "[transforms]") {
  AugmentHParams hp;
  hp.fill = kFill;
  hp.translate_const = 5;
  hp.translate_pct = 0.45;
  int64_t cases = 0;
  for (const std::string prefix : {"op.", "op_gray."}) {
    const Image src = ref_image(prefix == "op." ? "src.rgb" : "src.gray");
    for (const auto& name : names_with_prefix(prefix)) {
      // <prefix><Name>.m<magnitude>.<pos|neg>.<interp>; the magnitude may contain a '.'
      const auto parts = split(name, '.');
      const AugmentOp op = parse_augment_op(parts[1]);
      std::string mag;
      for (size_t i = 2; i + 2 < parts.size(); ++i) mag += (i > 2 ? "." : "") + parts[i];
      const double magnitude = std::stod(mag.substr(1));
      const bool negate = parts[parts.size() - 2] == "neg";
      const Interpolation interp = parse_interpolation(parts.back());
      INFO(name);
      const double arg = augment_op_argument(op, magnitude, negate, hp);
      const std::string arg_name = (prefix == "op." ? "arg." : "arg_gray.") + name.substr(prefix.size());
      CHECK(arg == refs().load(arg_name).item());
      Image img = src;
      apply_augment_op(img, op, arg, interp, kFill);
      CHECK(count_diff(img, ref_image(name)) == 0);
      ++cases;
    }
  }
  CHECK(cases == 61);
}

TEST_CASE("ImageEnhance at colour-jitter factors matches PIL", "[transforms]") {
  const Image src = ref_image("src.rgb");
  const auto names = names_with_prefix("enhance.");
  REQUIRE(names.size() == 8);
  for (const auto& name : names) {
    const std::string kind = split(name, '.')[1];
    const double factor = std::stod(name.substr(name.find('.', 8) + 1));
    Image img = src;
    if (kind == "Brightness") enhance_brightness(img, factor);
    if (kind == "Contrast") enhance_contrast(img, factor);
    if (kind == "Color") enhance_color(img, factor);
    if (kind == "Sharpness") enhance_sharpness(img, factor);
    INFO(name);
    CHECK(count_diff(img, ref_image(name)) == 0);
  }
}

TEST_CASE("equalize clips its table at 255 as PIL does", "[transforms]") {
  // 511 black pixels and one white: step = (512 - 1) // 255 = 2 and the table entry for 255 is
  // (1 + 511) // 2 = 256, which PIL stores as 255. Checked with
  // ImageOps.equalize(Image.fromarray(a.reshape(16, 32))) on Pillow 9.4: values {0, 255}.
  Image img(16, 32, 1);
  img.pixels.back() = 255;
  equalize(img);
  CHECK(img.pixels.back() == 255);
  CHECK(std::count(img.pixels.begin(), img.pixels.end(), 0) == 511);
}

TEST_CASE("flips, crops and padding move the pixels they should", "[transforms]") {
  const Image img = test_image(5, 7, 3);
  Image h = img, v = img;
  hflip(h);
  vflip(v);
  for (int64_t y = 0; y < 5; ++y) {
    for (int64_t x = 0; x < 7; ++x) {
      for (int c = 0; c < 3; ++c) {
        CHECK(h.at(y, x)[c] == img.at(y, 6 - x)[c]);
        CHECK(v.at(y, x)[c] == img.at(4 - y, x)[c]);
      }
    }
  }
  const Image c = crop(img, {1, 2, 3, 4});
  CHECK(c.at(0, 0)[1] == img.at(1, 2)[1]);
  CHECK(c.at(2, 3)[2] == img.at(3, 5)[2]);
  // Padding: constant fill, numpy-style reflect (edge not repeated), edge.
  const Box box{-2, -1, 9, 10};
  const Image pc = crop_padded(img, box, PadMode::Constant, {9, 8, 7});
  const Image pr = crop_padded(img, box, PadMode::Reflect);
  const Image pe = crop_padded(img, box, PadMode::Edge);
  CHECK(pc.at(0, 0)[0] == 9);
  CHECK(pc.at(2, 1)[2] == img.at(0, 0)[2]);
  CHECK(pr.at(0, 0)[0] == img.at(2, 1)[0]);
  CHECK(pr.at(8, 9)[0] == img.at(4 - 2, 6 - 2)[0]);  // row 6 -> 2, column 8 -> 4
  CHECK(pe.at(0, 0)[0] == img.at(0, 0)[0]);
  CHECK(pe.at(8, 9)[1] == img.at(4, 6)[1]);
  CHECK_THROWS_WITH(crop(img, {0, 0, 6, 2}), Contains("crop") && Contains("5x7"));
  CHECK_THROWS_WITH(crop_padded(img, {-5, 0, 3, 3}, PadMode::Reflect), Contains("reflect"));
  CHECK_THROWS_WITH(resize(img, 0, 3, Interpolation::Bilinear), Contains("resize") && Contains("0x3"));
  CHECK_THROWS_WITH(parse_interpolation("lanczos"), Contains("lanczos"));
  CHECK_THROWS_WITH(parse_pad_mode("wrap"), Contains("wrap"));
  Image bad(2, 2, 4);
  CHECK_THROWS_WITH(invert(bad), Contains("4"));
}

// ---- eval geometry -----------------------------------------------------------------------------------

TEST_CASE("eval geometry: scale size, shorter-side resize and centre crop follow torchvision", "[transforms]") {
  CHECK(eval_scale_size(224, 0.875) == 256);
  CHECK(eval_scale_size(224, 0.9) == 248);
  CHECK(eval_scale_size(224, 1.0) == 224);
  CHECK(eval_scale_size(28, 0.875) == 32);
  CHECK_THROWS_WITH(eval_scale_size(224, 0.0), Contains("crop_pct"));
  CHECK_THROWS_WITH(eval_scale_size(224, 1.5), Contains("1.5"));

  CHECK(shorter_side_size(375, 500, 256) == std::array<int64_t, 2>{256, 341});  // int(256 * 500 / 375)
  CHECK(shorter_side_size(500, 375, 256) == std::array<int64_t, 2>{341, 256});
  CHECK(shorter_side_size(300, 300, 32) == std::array<int64_t, 2>{32, 32});

  // top = round((H - h) / 2) with Python's half-to-even rounding.
  auto same = [](const Box& a, const Box& b) {
    return a.top == b.top && a.left == b.left && a.height == b.height && a.width == b.width;
  };
  CHECK(same(center_crop_box(256, 341, 224, 224), {16, 58, 224, 224}));  // 58.5 -> 58
  CHECK(same(center_crop_box(257, 224, 224, 224), {16, 0, 224, 224}));   // 16.5 -> 16
  CHECK(same(center_crop_box(259, 227, 224, 224), {18, 2, 224, 224}));   // 17.5 -> 18, 1.5 -> 2
  // Smaller than the crop: zero-padded by d // 2 before (and (d + 1) // 2 after).
  CHECK(same(center_crop_box(20, 40, 30, 30), {-5, 5, 30, 30}));
  CHECK(same(center_crop_box(21, 40, 30, 30), {-4, 5, 30, 30}));

  const Image img = test_image(21, 40, 3);
  const Image cc = center_crop(img, 30, 30);
  CHECK(cc.at(0, 0)[0] == 0);
  CHECK(cc.at(3, 0)[0] == 0);
  CHECK(cc.at(4, 0)[1] == img.at(0, 5)[1]);
  CHECK(cc.at(29, 29)[2] == 0);
  CHECK(cc.at(24, 29)[2] == img.at(20, 34)[2]);

  // The fused eval op equals resizing fully and then centre-cropping.
  for (auto interp : {Interpolation::Bilinear, Interpolation::Bicubic}) {
    for (auto [scale, size] : {std::pair<int64_t, int64_t>{32, 28}, {20, 20}, {50, 24}, {18, 24}}) {
      INFO(scale << " " << size);
      CHECK(count_diff(resize_center_crop(img, scale, size, interp),
                       center_crop(resize_shorter_side(img, scale, interp), size, size)) == 0);
    }
  }
}

TEST_CASE("the eval pipeline matches timm's transforms_imagenet_eval", "[transforms]") {
  struct Case {
    std::string name, src;
    int64_t size;
    double crop_pct;
    std::string interp;
    std::vector<double> mean, std;
    int64_t chans;
  };
  const std::vector<Case> cases = {
      {"photo_bicubic_28_0.875", "photo", 28, 0.875, "bicubic", imagenet_mean(), imagenet_std(), 3},
      {"rgb_bilinear_24_1.0", "rgb", 24, 1.0, "bilinear", imagenet_mean(), imagenet_std(), 3},
      {"gray_bilinear_16_0.9", "gray", 16, 0.9, "bilinear", {0.5}, {0.25}, 1},
  };
  for (const auto& c : cases) {
    TransformOptions o;
    o.img_size = c.size;
    o.crop_pct = c.crop_pct;
    o.interpolation = c.interp;
    o.mean = c.mean;
    o.std = c.std;
    o.in_chans = c.chans;
    const auto transform = create_transform(o);
    SampleRng rng(1, 0, 0);
    const Tensor out = transform(ref_image("src." + c.src), rng);
    const Tensor expected = refs().load("eval." + c.name);
    INFO(c.name);
    REQUIRE(out.shape() == expected.shape());
    // Bit-identical: the same pixels and the same float32 operations as torchvision.
    CHECK(max_abs_diff(out, expected) == 0.0f);
  }
}

TEST_CASE("ToTensor + Normalize computes (v / 255 - mean) / std in float32 exactly", "[transforms]") {
  const Image img = test_image(3, 4, 3);
  const ToTensorNormalize norm(imagenet_mean(), imagenet_std());
  const Tensor t = norm(img);
  REQUIRE(t.shape() == Shape{3, 3, 4});
  const auto v = t.to_vector<float>();
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < 3; ++y) {
      for (int64_t x = 0; x < 4; ++x) {
        const float expected = (static_cast<float>(img.at(y, x)[c]) / 255.0f - static_cast<float>(imagenet_mean()[c])) /
                               static_cast<float>(imagenet_std()[c]);
        CHECK(v[(c * 3 + y) * 4 + x] == expected);
      }
    }
  }
  CHECK_THROWS_WITH(norm(test_image(3, 4, 1)), Contains("normalize") && Contains("1 channels"));
  CHECK_THROWS_WITH(ToTensorNormalize({0.5}, {0.5, 0.5}), Contains("normalize"));
  CHECK_THROWS_WITH(ToTensorNormalize({0.5}, {0.0}), Contains("std"));
}

// ---- random transforms -------------------------------------------------------------------------------

TEST_CASE("RandomResizedCrop boxes respect scale and ratio, are deterministic, and fall back centrally",
          "[transforms]") {
  const std::array<double, 2> scale = {0.08, 1.0}, ratio = {3.0 / 4.0, 4.0 / 3.0};
  const int64_t H = 120, W = 90;
  std::set<std::array<int64_t, 4>> distinct;
  for (uint64_t i = 0; i < 2000; ++i) {
    SampleRng rng(5, 1, i);
    const Box b = random_resized_crop_box(H, W, scale, ratio, rng);
    INFO("sample " << i << ": " << b.top << " " << b.left << " " << b.height << " " << b.width);
    REQUIRE(b.top >= 0);
    REQUIRE(b.left >= 0);
    REQUIRE(b.top + b.height <= H);
    REQUIRE(b.left + b.width <= W);
    // w and h are rounded from real values inside the ranges: allow half a pixel each way.
    const double hw = static_cast<double>(H * W);
    CHECK((b.width + 0.5) * (b.height + 0.5) >= scale[0] * hw);
    CHECK((b.width - 0.5) * (b.height - 0.5) <= scale[1] * hw);
    CHECK((b.width + 0.5) / (b.height - 0.5) >= ratio[0]);
    CHECK((b.width - 0.5) / (b.height + 0.5) <= ratio[1]);
    SampleRng again(5, 1, i);
    const Box c = random_resized_crop_box(H, W, scale, ratio, again);
    CHECK((c.top == b.top && c.left == b.left && c.height == b.height && c.width == b.width));
    distinct.insert({b.top, b.left, b.height, b.width});
  }
  CHECK(distinct.size() > 1900);
  // No crop of an allowed ratio fits a 10x200 strip: the fallback is the central 10x13
  // (h = 10, w = round(10 * 4/3)), and 13x10 for the transposed strip.
  SampleRng rng(1, 0, 0);
  Box b = random_resized_crop_box(10, 200, scale, ratio, rng);
  CHECK((b.top == 0 && b.left == 93 && b.height == 10 && b.width == 13));
  b = random_resized_crop_box(200, 10, scale, ratio, rng);
  CHECK((b.top == 93 && b.left == 0 && b.height == 13 && b.width == 10));
  // A scale range above 1 never fits: the whole image (its ratio is allowed).
  b = random_resized_crop_box(40, 50, {1.5, 2.0}, ratio, rng);
  CHECK((b.top == 0 && b.left == 0 && b.height == 40 && b.width == 50));
  CHECK_THROWS_WITH(random_resized_crop_box(40, 50, {0.5, 0.1}, ratio, rng), Contains("scale"));
  // The resized crop is the box resized.
  const Image img = test_image(60, 70, 3);
  SampleRng r1(3, 0, 9), r2(3, 0, 9);
  const Image out = random_resized_crop(img, 32, 32, scale, ratio, Interpolation::Bicubic, r1);
  const Box box = random_resized_crop_box(60, 70, scale, ratio, r2);
  CHECK(count_diff(out, resize(crop(img, box), 32, 32, Interpolation::Bicubic)) == 0);
}

TEST_CASE("RandomCrop with padding takes every offset of the padded image", "[transforms]") {
  const Image img = test_image(32, 32, 3);
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (uint64_t i = 0; i < 2000; ++i) {
    SampleRng rng(2, 0, i);
    const Image out = random_crop(img, 32, 32, 4, PadMode::Constant, {0, 0, 0}, rng);
    // Find the offset: the crop equals crop_padded at exactly one (dy, dx) in [-4, 4]^2.
    int found = 0;
    for (int64_t dy = -4; dy <= 4; ++dy) {
      for (int64_t dx = -4; dx <= 4; ++dx) {
        if (count_diff(out, crop_padded(img, {dy, dx, 32, 32}, PadMode::Constant)) == 0) {
          ++found;
          offsets.insert({dy, dx});
        }
      }
    }
    REQUIRE(found == 1);
    if (offsets.size() == 81) break;
  }
  CHECK(offsets.size() == 81);
  SampleRng rng(0, 0, 0);
  CHECK_THROWS_WITH(random_crop(img, 40, 40, 2, PadMode::Constant, {0, 0, 0}, rng), Contains("40x40"));
  CHECK(count_diff(random_crop(img, 32, 32, 0, PadMode::Constant, {0, 0, 0}, rng), img) == 0);
}

TEST_CASE("random flips and colour jitter", "[transforms]") {
  const Image img = test_image(8, 9, 3);
  int flips = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    SampleRng rng(4, 0, i);
    Image a = img;
    flips += random_hflip(a, 0.5, rng);
  }
  CHECK(flips > 430);
  CHECK(flips < 570);
  SampleRng rng(4, 0, 0);
  Image a = img;
  CHECK_FALSE(random_hflip(a, 0.0, rng));
  CHECK(random_vflip(a, 1.0, rng));

  // Off: untouched. Brightness only: every pixel scaled by one factor in [0.6, 1.4].
  Image j = img;
  ColorJitter{}(j, rng);
  CHECK(count_diff(j, img) == 0);
  for (uint64_t i = 0; i < 20; ++i) {
    SampleRng r(6, 0, i);
    Image b = img;
    ColorJitter{0.4, 0.0, 0.0}(b, r);
    double lo = 10, hi = 0;
    for (size_t k = 0; k < b.pixels.size(); ++k) {
      if (img.pixels[k] < 100 || b.pixels[k] == 255) continue;
      const double ratio = b.pixels[k] / static_cast<double>(img.pixels[k]);
      lo = std::min(lo, ratio);
      hi = std::max(hi, ratio);
    }
    CHECK(hi - lo < 0.02);  // truncation to integers only
    CHECK(lo > 0.59);
    CHECK(hi < 1.41);
    // Deterministic for a given stream.
    SampleRng r2(6, 0, i);
    Image c = img;
    ColorJitter{0.4, 0.0, 0.0}(c, r2);
    CHECK(count_diff(b, c) == 0);
  }
}

TEST_CASE("random erasing touches one rectangle within the area bounds, in every channel", "[transforms]") {
  const int64_t C = 3, H = 40, W = 50;
  RandomErasing re;
  re.probability = 1.0;
  int64_t erased = 0;
  for (const std::string mode : {"pixel", "rand", "const"}) {
    re.mode = mode;
    for (uint64_t i = 0; i < 200; ++i) {
      Tensor t = full({C, H, W}, 1000.0);
      SampleRng rng(8, 0, i);
      const auto boxes = re(t, rng);
      REQUIRE(boxes.size() <= 1);
      const auto v = t.to_vector<float>();
      if (boxes.empty()) {
        CHECK(std::count(v.begin(), v.end(), 1000.0f) == C * H * W);
        continue;
      }
      ++erased;
      const Box b = boxes[0];
      INFO(mode << " sample " << i);
      CHECK(b.height < H);
      CHECK(b.width < W);
      CHECK((b.height + 0.5) * (b.width + 0.5) >= 0.02 * H * W);
      CHECK((b.height - 0.5) * (b.width - 0.5) <= H * W / 3.0);
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t y = 0; y < H; ++y) {
          for (int64_t x = 0; x < W; ++x) {
            const bool inside = y >= b.top && y < b.top + b.height && x >= b.left && x < b.left + b.width;
            const float val = v[(c * H + y) * W + x];
            if (!inside) {
              REQUIRE(val == 1000.0f);
            } else if (mode == "const") {
              REQUIRE(val == 0.0f);
            } else if (mode == "rand") {
              REQUIRE(val == v[(c * H + b.top) * W + b.left]);
            } else {
              REQUIRE(std::abs(val) < 10.0f);
            }
          }
        }
      }
    }
  }
  CHECK(erased > 500);  // 10 tries of a box of up to a third of the image nearly always succeed
  // Per-pixel noise is standard normal.
  re.mode = "pixel";
  re.min_area = re.max_area = 0.3;
  double sum = 0, sq = 0;
  int64_t n = 0;
  for (uint64_t i = 0; i < 50; ++i) {
    Tensor t = zeros({1, 100, 100});
    SampleRng rng(9, 0, i);
    re(t, rng);
    for (float x : t.to_vector<float>()) {
      if (x == 0.0f) continue;
      sum += x;
      sq += x * x;
      ++n;
    }
  }
  CHECK(std::abs(sum / n) < 0.02);
  CHECK(std::abs(std::sqrt(sq / n) - 1.0) < 0.02);
  // Count up to 3 boxes; probability 0 never erases.
  re.max_count = 3;
  re.min_area = 0.02;
  re.max_area = 1.0 / 3.0;
  std::set<size_t> counts;
  for (uint64_t i = 0; i < 100; ++i) {
    Tensor t = zeros({1, 30, 30});
    SampleRng rng(10, 0, i);
    counts.insert(re(t, rng).size());
  }
  CHECK(counts == std::set<size_t>{1, 2, 3});
  re.probability = 0.0;
  Tensor t = zeros({1, 30, 30});
  SampleRng rng(0, 0, 0);
  CHECK(re(t, rng).empty());
  re.mode = "noise";
  CHECK_THROWS_WITH(re(t, rng), Contains("noise"));
}

// ---- RandAugment ---------------------------------------------------------------------------------------

TEST_CASE("RandAugment strings parse as timm reads them", "[transforms]") {
  auto cfg = parse_rand_augment("rand-m9-mstd0.5-inc1");
  CHECK(cfg.magnitude == 9);
  CHECK(cfg.num_layers == 2);
  CHECK(cfg.prob == 0.5);
  CHECK(cfg.magnitude_std == 0.5);
  CHECK(cfg.magnitude_max == 10.0);
  CHECK(cfg.increasing);
  const RandAugment inc("rand-m9-mstd0.5-inc1");
  std::vector<std::string> names;
  for (auto op : inc.ops()) names.push_back(augment_op_name(op));
  CHECK(names == std::vector<std::string>{"AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing",
                                          "SolarizeIncreasing", "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing",
                                          "BrightnessIncreasing", "SharpnessIncreasing", "ShearX", "ShearY",
                                          "TranslateXRel", "TranslateYRel"});
  CHECK(inc.weights().empty());

  cfg = parse_rand_augment("rand-m9-n3-mstd0.5");
  CHECK((cfg.num_layers == 3 && !cfg.increasing));
  CHECK(augment_op_name(RandAugment("rand-m9-n2-mstd0.5").ops()[4]) == std::string("Posterize"));
  CHECK_FALSE(parse_rand_augment("rand-m9-inc0").increasing);  // timm 1.0: bool(int("0"))
  CHECK(std::isinf(parse_rand_augment("rand-m9-mstd101").magnitude_std));
  CHECK(parse_rand_augment("rand-mmax0").magnitude_max == 10.0);
  CHECK(parse_rand_augment("rand-m12-mmax15").magnitude_max == 15.0);
  CHECK(parse_rand_augment("rand-p1.0").prob == 1.0);
  CHECK(parse_rand_augment("rand").magnitude == 10);
  const RandAugment weighted("rand-mstd1-w0");
  CHECK(weighted.config().magnitude == 10);
  CHECK(weighted.config().magnitude_std == 1.0);
  CHECK(weighted.weights().size() == 15);
  CHECK(augment_op_name(weighted.ops()[0]) == std::string("Rotate"));
  CHECK(RandAugment("rand-m9-tweights").weights().size() == 15);

  CHECK_THROWS_WITH(parse_rand_augment("rand-m9-foo1"), Contains("\"rand-m9-foo1\"") && Contains("foo1"));
  CHECK_THROWS_WITH(parse_rand_augment("rand-m9-bar"), Contains("rand-m9-bar") && Contains("bar"));
  CHECK_THROWS_WITH(parse_rand_augment("rand-m9.5"), Contains("rand-m9.5") && Contains("integer"));
  CHECK_THROWS_WITH(parse_rand_augment("rand-p1.5"), Contains("rand-p1.5") && Contains("[0, 1]"));
  CHECK_THROWS_WITH(parse_rand_augment("rand-mstd0.5x"), Contains("rand-mstd0.5x"));
  CHECK_THROWS_WITH(parse_rand_augment("augmix-m5"), Contains("augmix-m5") && Contains("rand"));
  CHECK_THROWS_WITH(parse_rand_augment(""), Contains("rand"));
  CHECK_THROWS_WITH(parse_rand_augment("rand-t3a"), Contains("rand-t3a") && Contains("3a"));
  CHECK_THROWS_WITH(parse_rand_augment("rand-w1"), Contains("rand-w1"));
  CHECK_THROWS_WITH(RandAugment("rand-n16-tweights"), Contains("rand-n16-tweights"));
  CHECK_THROWS_WITH(parse_augment_op("Cutout"), Contains("Cutout"));
}

TEST_CASE("RandAugment draws ops uniformly, applies each with p, and perturbs the magnitude", "[transforms]") {
  const RandAugment ra("rand-m9-mstd0.5-inc1");
  std::map<AugmentOp, int64_t> counts;
  int64_t steps = 0, applied = 0, negated = 0, signed_ops = 0, bilinear = 0, geometric = 0;
  double sum = 0, sq = 0;
  for (uint64_t i = 0; i < 6000; ++i) {
    SampleRng rng(11, 2, i);
    const auto draw = ra.sample(rng);
    REQUIRE(draw.size() == 2);
    for (const auto& s : draw) {
      ++steps;
      ++counts[s.op];
      if (!s.applied) continue;
      ++applied;
      REQUIRE(s.magnitude >= 0.0);
      REQUIRE(s.magnitude <= 10.0);
      sum += s.magnitude;
      sq += s.magnitude * s.magnitude;
      if (augment_op_signed(s.op)) {
        ++signed_ops;
        negated += s.negate;
      }
      if (augment_op_geometric(s.op)) {
        ++geometric;
        bilinear += s.interp == Interpolation::Bilinear;
      }
    }
  }
  CHECK(counts.size() == 15);
  for (const auto& [op, n] : counts) {
    INFO(augment_op_name(op));
    CHECK(std::abs(n - steps / 15.0) < 0.15 * steps / 15.0);
  }
  CHECK(std::abs(applied / static_cast<double>(steps) - 0.5) < 0.02);
  const double mean = sum / applied, stdev = std::sqrt(sq / applied - mean * mean);
  CHECK(std::abs(mean - 9.0) < 0.03);
  CHECK(std::abs(stdev - 0.5) < 0.03);
  CHECK(std::abs(negated / static_cast<double>(signed_ops) - 0.5) < 0.03);
  CHECK(std::abs(bilinear / static_cast<double>(geometric) - 0.5) < 0.05);  // "random" interpolation

  // A fixed interpolation is used for every geometric op; mstd > 100 draws U(0, m).
  AugmentHParams hp;
  hp.interpolation = Interpolation::Bicubic;
  const RandAugment uniform("rand-m8-mstd200-p1.0", hp);
  double lo = 10, hi = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    SampleRng rng(12, 0, i);
    for (const auto& s : uniform.sample(rng)) {
      REQUIRE(s.applied);
      CHECK(s.interp == Interpolation::Bicubic);
      lo = std::min(lo, s.magnitude);
      hi = std::max(hi, s.magnitude);
    }
  }
  CHECK(lo < 0.05);
  CHECK(hi > 7.95);
  CHECK(hi <= 8.0);

  // Weighted sets draw without replacement, Rotate (weight 3 of 10.9) most often.
  const RandAugment weighted("rand-m9-tweights-n3");
  std::map<AugmentOp, int64_t> wcounts;
  for (uint64_t i = 0; i < 3000; ++i) {
    SampleRng rng(13, 0, i);
    const auto draw = weighted.sample(rng);
    REQUIRE(draw.size() == 3);
    CHECK(draw[0].op != draw[1].op);
    CHECK(draw[1].op != draw[2].op);
    CHECK(draw[0].op != draw[2].op);
    for (const auto& s : draw) ++wcounts[s.op];
  }
  for (const auto& [op, n] : wcounts) CHECK(n <= wcounts[AugmentOp::Rotate]);

  // Applying a draw is deterministic, and operator() is sample + apply.
  const Image img = test_image(20, 24, 3);
  for (uint64_t i = 0; i < 30; ++i) {
    SampleRng a(14, 0, i), b(14, 0, i);
    Image x = img, y = img;
    ra(x, a);
    ra.apply(y, ra.sample(b));
    CHECK(count_diff(x, y) == 0);
  }
}

// ---- Mixup / CutMix -------------------------------------------------------------------------------------

TEST_CASE("mixup_target matches timm with label smoothing 0.1", "[transforms]") {
  const Tensor target = labels({3, 0, 4, 1});
  const Tensor batch = mixup_target(target, 5, {0.3}, 0.1);
  CHECK(max_abs_diff(batch, refs().load("mixup_target.batch")) == 0.0f);
  const Tensor elem = mixup_target(
      target, 5, {static_cast<float>(0.3), static_cast<float>(0.7), static_cast<float>(0.55), 1.0}, 0.1, true);
  CHECK(max_abs_diff(elem, refs().load("mixup_target.elem")) == 0.0f);
  // Closed form: off = 0.1 / 5 = 0.02, on = 0.92; row 0 is 0.3 * y(3) + 0.7 * y(1).
  const auto v = batch.to_vector<float>();
  const float on = static_cast<float>(1.0 - 0.1 + 0.02), off = 0.02f;
  const float lam = 0.3f, rest = static_cast<float>(1.0 - 0.3);
  CHECK(v[3] == on * lam + off * rest);
  CHECK(v[1] == off * lam + on * rest);
  CHECK(v[0] == off * lam + off * rest);
  CHECK_THROWS_WITH(mixup_target(labels({0, 5}), 5, {0.5}, 0.1), Contains("mixup_target") && Contains("label 5"));
}

TEST_CASE("Mixup mixes each sample with its mirror partner and targets follow lambda", "[transforms]") {
  const int64_t B = 6, C = 2, H = 5, W = 7, K = 4;
  Generator gen(3);
  const Tensor original = randn({B, C, H, W}, DType::Float32, &gen);
  const Tensor target = labels({0, 1, 2, 3, 1, 0});
  const auto x0 = original.to_vector<float>();
  const int64_t n = C * H * W;

  MixupOptions mo;
  mo.mixup_alpha = 0.8;
  mo.num_classes = K;
  const Mixup mixup(mo);
  for (uint64_t step = 0; step < 20; ++step) {
    Tensor x = original.clone();
    SampleRng rng(21, 0, step);
    std::vector<MixInfo> info;
    const Tensor t = mixup(x, target, rng, &info);
    REQUIRE(info.size() == B);
    const double lam = info[0].lam;
    CHECK_FALSE(info[0].cutmix);
    const auto xv = x.to_vector<float>();
    for (int64_t i = 0; i < B; ++i) {
      for (int64_t k = 0; k < n; ++k) {
        REQUIRE(xv[i * n + k] ==
                x0[i * n + k] * static_cast<float>(lam) + x0[(B - 1 - i) * n + k] * static_cast<float>(1.0 - lam));
      }
    }
    CHECK(max_abs_diff(t, mixup_target(target, K, {lam}, 0.1)) == 0.0f);
    SampleRng again(21, 0, step);
    Tensor y = original.clone();
    CHECK(max_abs_diff(mixup(y, target, again), t) == 0.0f);
    CHECK(max_abs_diff(y, x) == 0.0f);
  }

  // CutMix: the box comes from the partner, lam = 1 - box area / (H W) exactly.
  mo.mixup_alpha = 0.0;
  mo.cutmix_alpha = 1.0;
  const Mixup cutmix(mo);
  for (uint64_t step = 0; step < 50; ++step) {
    Tensor x = original.clone();
    SampleRng rng(22, 0, step);
    std::vector<MixInfo> info;
    const Tensor t = cutmix(x, target, rng, &info);
    const MixInfo m = info[0];
    REQUIRE(m.cutmix);
    CHECK(m.lam == 1.0 - static_cast<double>(m.box.height * m.box.width) / (H * W));
    const auto xv = x.to_vector<float>();
    for (int64_t i = 0; i < B; ++i) {
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t y = 0; y < H; ++y) {
          for (int64_t xx = 0; xx < W; ++xx) {
            const bool inside =
                y >= m.box.top && y < m.box.top + m.box.height && xx >= m.box.left && xx < m.box.left + m.box.width;
            const int64_t k = (c * H + y) * W + xx;
            REQUIRE(xv[i * n + k] == x0[(inside ? B - 1 - i : i) * n + k]);
          }
        }
      }
    }
    CHECK(max_abs_diff(t, mixup_target(target, K, {m.lam}, 0.1)) == 0.0f);
  }

  // cutmix_minmax: box sides in [int(0.2 S), int(0.8 S) - 1].
  mo.cutmix_minmax = std::array<double, 2>{0.2, 0.8};
  const Mixup minmax(mo);
  for (uint64_t step = 0; step < 50; ++step) {
    Tensor x = original.clone();
    SampleRng rng(23, 0, step);
    std::vector<MixInfo> info;
    minmax(x, target, rng, &info);
    CHECK(info[0].box.height >= 1);
    CHECK(info[0].box.height <= 3);
    CHECK(info[0].box.width >= 1);
    CHECK(info[0].box.width <= 4);
    CHECK(info[0].lam == 1.0 - static_cast<double>(info[0].box.height * info[0].box.width) / (H * W));
  }
}

TEST_CASE("Mixup pair and elem modes, switching, probability and switching off", "[transforms]") {
  const int64_t B = 4, C = 1, H = 4, W = 4, K = 3;
  Generator gen(4);
  const Tensor original = randn({B, C, H, W}, DType::Float32, &gen);
  const Tensor target = labels({0, 1, 2, 1});
  const auto x0 = original.to_vector<float>();
  const int64_t n = C * H * W;
  MixupOptions mo;
  mo.num_classes = K;
  mo.mixup_alpha = 1.0;

  for (const std::string mode : {"pair", "elem"}) {
    mo.mode = mode;
    const Mixup mixup(mo);
    Tensor x = original.clone();
    SampleRng rng(31, 0, 0);
    std::vector<MixInfo> info;
    const Tensor t = mixup(x, target, rng, &info);
    std::vector<double> lams;
    const auto xv = x.to_vector<float>();
    for (int64_t i = 0; i < B; ++i) {
      const float a = static_cast<float>(info[i].lam), b = 1.0f - a;
      lams.push_back(info[i].lam);
      for (int64_t k = 0; k < n; ++k) REQUIRE(xv[i * n + k] == x0[i * n + k] * a + x0[(B - 1 - i) * n + k] * b);
    }
    if (mode == "pair") {
      CHECK(info[0].lam == info[3].lam);
      CHECK(info[1].lam == info[2].lam);
    } else {
      CHECK(info[0].lam != info[3].lam);
    }
    CHECK(max_abs_diff(t, mixup_target(target, K, lams, 0.1, true)) == 0.0f);
  }

  // Both enabled: CutMix about switch_prob of the time.
  mo.mode = "batch";
  mo.cutmix_alpha = 1.0;
  const Mixup both(mo);
  int cut = 0;
  for (uint64_t step = 0; step < 1000; ++step) {
    Tensor x = original.clone();
    SampleRng rng(32, 0, step);
    std::vector<MixInfo> info;
    both(x, target, rng, &info);
    cut += info[0].cutmix;
  }
  CHECK(cut > 440);
  CHECK(cut < 560);

  // prob 0, or switched off: images untouched, targets only smoothed.
  mo.prob = 0.0;
  for (bool off : {false, true}) {
    if (off) mo.prob = 1.0;
    Mixup m(mo);
    m.set_enabled(!off);
    Tensor x = original.clone();
    SampleRng rng(33, 0, 0);
    const Tensor t = m(x, target, rng);
    CHECK(max_abs_diff(x, original) == 0.0f);
    CHECK(max_abs_diff(t, mixup_target(target, K, {1.0}, 0.1)) == 0.0f);
  }

  SampleRng rng(0, 0, 0);
  Tensor odd = zeros({3, 1, 2, 2});
  MixupOptions plain;
  plain.num_classes = K;
  const Mixup m(plain);
  CHECK_THROWS_WITH(m(odd, labels({0, 1, 2}), rng), Contains("even") && Contains("3"));
  Tensor x = original.clone();
  CHECK_THROWS_WITH(m(x, labels({0, 1, 2, 7}), rng), Contains("label 7"));
  CHECK(max_abs_diff(x, original) == 0.0f);  // rejected before anything was mixed
  plain.mode = "row";
  CHECK_THROWS_WITH(Mixup(plain), Contains("row"));
  plain.mode = "batch";
  plain.mixup_alpha = 0.0;
  CHECK_THROWS_WITH(Mixup(plain), Contains("mixup_alpha"));
}

TEST_CASE("Beta samples have the right mean and variance", "[transforms]") {
  for (double a : {0.2, 0.8, 1.0, 2.5}) {
    double sum = 0, sq = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      SampleRng rng(40, 0, i);
      const double v = sample_beta(a, rng);
      REQUIRE(v >= 0.0);
      REQUIRE(v <= 1.0);
      sum += v;
      sq += v * v;
    }
    const double mean = sum / n, var = sq / n - mean * mean;
    INFO("alpha " << a);
    CHECK(std::abs(mean - 0.5) < 0.01);
    CHECK(std::abs(var - 1.0 / (4.0 * (2.0 * a + 1.0))) < 0.01);
  }
}

// ---- create_transform ------------------------------------------------------------------------------------

TEST_CASE("create_transform builds timm's training pipeline", "[transforms]") {
  const Image photo = test_image(75, 100, 3);
  TransformOptions o;
  o.is_training = true;
  o.img_size = 48;
  const auto train = create_transform(o);
  SampleRng r1(1, 0, 5), r2(1, 0, 5), r3(1, 0, 6);
  const Tensor a = train(photo, r1);
  CHECK(a.shape() == Shape{3, 48, 48});
  CHECK(a.dtype() == DType::Float32);
  CHECK(max_abs_diff(a, train(photo, r2)) == 0.0f);
  CHECK(max_abs_diff(a, train(photo, r3)) > 0.0f);

  // Nothing random left: "none" on an image already at the size is just ToTensor + Normalize.
  const Image small = test_image(28, 28, 3);
  o.img_size = 28;
  o.primary = "none";
  o.hflip = 0;
  o.color_jitter = 0;
  CHECK(max_abs_diff(create_transform(o)(small, r1), ToTensorNormalize(imagenet_mean(), imagenet_std())(small)) ==
        0.0f);

  // A RandAugment string turns colour jitter off (p0.0 draws but never applies an op).
  o.auto_augment = "rand-m9-mstd0.5-inc1-p0.0";
  o.color_jitter = 0.4;
  const auto with_jitter_requested = create_transform(o);
  o.color_jitter = 0.0;
  const auto without_jitter = create_transform(o);
  for (uint64_t i = 0; i < 5; ++i) {
    SampleRng x(2, 0, i), y(2, 0, i);
    CHECK(max_abs_diff(with_jitter_requested(small, x), without_jitter(small, y)) == 0.0f);
  }

  // crop_pad: the CIFAR recipe, every output a padded crop of the input (no flip, no jitter).
  o.auto_augment.clear();
  o.primary = "crop_pad";
  o.img_size = 32;
  const Image cifar = test_image(32, 32, 3);
  const auto crop_pad = create_transform(o);
  const ToTensorNormalize norm(imagenet_mean(), imagenet_std());
  for (uint64_t i = 0; i < 10; ++i) {
    SampleRng rng(3, 0, i);
    const Tensor out = crop_pad(cifar, rng);
    bool found = false;
    for (int64_t dy = -4; dy <= 4 && !found; ++dy) {
      for (int64_t dx = -4; dx <= 4 && !found; ++dx) {
        found = max_abs_diff(out, norm(crop_padded(cifar, {dy, dx, 32, 32}, PadMode::Constant))) == 0.0f;
      }
    }
    CHECK(found);
  }

  // Random erasing runs last, on the normalized tensor: with the same stream, the output differs
  // from the unerased one only inside one rectangle.
  o.primary = "rrc";
  o.hflip = 0.5;
  o.color_jitter = 0.4;
  o.auto_augment = "rand-m9-mstd0.5-inc1";
  o.interpolation = "random";
  const auto plain = create_transform(o);
  o.reprob = 1.0;
  const auto erased = create_transform(o);
  for (uint64_t i = 0; i < 10; ++i) {
    SampleRng x(4, 0, i), y(4, 0, i);
    const auto p = plain(photo, x).to_vector<float>(), e = erased(photo, y).to_vector<float>();
    int64_t y0 = 32, y1 = -1, x0 = 32, x1 = -1, changed = 0;
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t yy = 0; yy < 32; ++yy) {
        for (int64_t xx = 0; xx < 32; ++xx) {
          if (p[(c * 32 + yy) * 32 + xx] == e[(c * 32 + yy) * 32 + xx]) continue;
          ++changed;
          y0 = std::min(y0, yy), y1 = std::max(y1, yy), x0 = std::min(x0, xx), x1 = std::max(x1, xx);
        }
      }
    }
    CHECK(changed == 3 * (y1 - y0 + 1) * (x1 - x0 + 1));
  }
}

TEST_CASE("create_transform converts channels and rejects bad options", "[transforms]") {
  // Grey data with its own statistics; an RGB input is converted to grey first.
  TransformOptions o;
  o.img_size = 28;
  o.in_chans = 1;
  o.crop_pct = 1.0;
  o.mean = {0.2860};
  o.std = {0.3530};
  const auto eval = create_transform(o);
  const Image rgb = test_image(28, 28, 3);
  SampleRng rng(0, 0, 0);
  const Tensor g = eval(rgb, rng);
  CHECK(g.shape() == Shape{1, 28, 28});
  CHECK(max_abs_diff(g, ToTensorNormalize({0.2860}, {0.3530})(to_grayscale(rgb))) == 0.0f);
  o.is_training = true;
  o.auto_augment = "rand-m9-mstd0.5-inc1";
  CHECK(create_transform(o)(test_image(28, 28, 1), rng).shape() == Shape{1, 28, 28});
  // A grey image for an RGB model is replicated.
  TransformOptions rgb_opts;
  rgb_opts.img_size = 16;
  rgb_opts.crop_pct = 1.0;
  const auto v = create_transform(rgb_opts)(test_image(16, 16, 1), rng);
  CHECK(v.shape() == Shape{3, 16, 16});

  auto bad = [](auto edit) {
    TransformOptions opt;
    opt.is_training = true;
    edit(opt);
    return create_transform(opt);
  };
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.in_chans = 1; }), Contains("in_chans 1") && Contains("mean"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.primary = "center"; }), Contains("center"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.auto_augment = "v0"; }), Contains("v0"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.auto_augment = "rand-m9-q3"; }), Contains("rand-m9-q3"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.interpolation = "nearest"; }), Contains("nearest"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.reprob = 0.25, x.remode = "zeros"; }), Contains("zeros"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.scale = {0.9, 0.1}; }), Contains("scale"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.crop_padding_mode = "wrap", x.primary = "crop_pad"; }),
                    Contains("wrap"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.is_training = false, x.interpolation = "random"; }),
                    Contains("random"));
  CHECK_THROWS_WITH(bad([](TransformOptions& x) { x.is_training = false, x.crop_pct = 0; }), Contains("crop_pct"));
}
