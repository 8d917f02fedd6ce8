// create_transform: timm's train / eval pipelines from TransformOptions (data/pipeline.h).
#include "tessera/data/pipeline.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "tessera/core/error.h"
#include "tessera/data/rand_augment.h"

namespace tessera::data {

namespace {

enum class Primary { RandomResizedCrop, CropPad, ResizeCenterCrop };

// Everything the per-sample function needs, built and validated once.
struct Pipeline {
  TransformOptions opt;
  bool random_interp = false;
  Interpolation interp = Interpolation::Bicubic;
  Primary primary = Primary::RandomResizedCrop;
  PadMode pad_mode = PadMode::Constant;
  std::optional<RandAugment> rand_augment;
  std::optional<ColorJitter> jitter;
  std::optional<RandomErasing> erasing;
  ToTensorNormalize normalize;
  int64_t eval_scale = 0;

  explicit Pipeline(const TransformOptions& o) : opt(o), normalize(checked_stats(o)) {
    TS_CHECK(o.img_size > 0, "create_transform: expected img_size > 0, got ", o.img_size);
    random_interp = o.interpolation == "random";
    TS_CHECK(!random_interp || o.is_training,
             "create_transform: interpolation \"random\" is for training only; evaluation needs \"bilinear\" or "
             "\"bicubic\"");
    if (!random_interp) interp = parse_interpolation(o.interpolation);
    if (!o.is_training) {
      eval_scale = eval_scale_size(o.img_size, o.crop_pct);
      return;
    }
    if (o.primary == "rrc") {
      primary = Primary::RandomResizedCrop;
      TS_CHECK(o.scale[0] > 0 && o.scale[0] <= o.scale[1] && o.ratio[0] > 0 && o.ratio[0] <= o.ratio[1],
               "create_transform: expected 0 < scale[0] <= scale[1] and 0 < ratio[0] <= ratio[1], got scale (",
               o.scale[0], ", ", o.scale[1], ") and ratio (", o.ratio[0], ", ", o.ratio[1], ")");
    } else if (o.primary == "crop_pad") {
      primary = Primary::CropPad;
      pad_mode = parse_pad_mode(o.crop_padding_mode);
      TS_CHECK(o.crop_padding >= 0, "create_transform: expected crop_padding >= 0, got ", o.crop_padding);
    } else if (o.primary == "none") {
      primary = Primary::ResizeCenterCrop;
    } else {
      TS_CHECK(false, "create_transform: expected primary \"rrc\", \"crop_pad\" or \"none\", got \"", o.primary, "\"");
    }
    TS_CHECK(o.hflip >= 0 && o.hflip <= 1 && o.vflip >= 0 && o.vflip <= 1,
             "create_transform: expected hflip and vflip in [0, 1], got ", o.hflip, " and ", o.vflip);
    TS_CHECK(o.color_jitter >= 0, "create_transform: expected color_jitter >= 0, got ", o.color_jitter);
    if (!o.auto_augment.empty()) {
      TS_CHECK(o.auto_augment.rfind("rand", 0) == 0, "create_transform: auto_augment \"", o.auto_augment,
               "\" is not supported; only RandAugment strings (\"rand-m9-mstd0.5-inc1\", ...) are");
      AugmentHParams hp;
      for (size_t c = 0; c < o.mean.size() && c < 3; ++c) {
        hp.fill[c] = static_cast<uint8_t>(std::clamp<int64_t>(python_round(255.0 * o.mean[c]), 0, 255));
      }
      hp.translate_const = static_cast<double>(static_cast<int64_t>(static_cast<double>(o.img_size) * 0.45));
      if (!random_interp) hp.interpolation = interp;
      rand_augment.emplace(o.auto_augment, hp);
    } else if (o.color_jitter > 0) {  // timm turns colour jitter off whenever auto_augment is set
      jitter = ColorJitter{o.color_jitter, o.color_jitter, o.color_jitter};
    }
    TS_CHECK(o.reprob >= 0 && o.reprob <= 1, "create_transform: expected reprob in [0, 1], got ", o.reprob);
    if (o.reprob > 0) {
      RandomErasing re;
      re.probability = o.reprob;
      re.mode = o.remode;
      re.max_count = o.recount;
      re.validate();
      erasing = re;
    }
  }

  static ToTensorNormalize checked_stats(const TransformOptions& o) {
    TS_CHECK(o.in_chans == 1 || o.in_chans == 3, "create_transform: expected in_chans 1 or 3, got ", o.in_chans);
    TS_CHECK(static_cast<int64_t>(o.mean.size()) == o.in_chans && static_cast<int64_t>(o.std.size()) == o.in_chans,
             "create_transform: expected ", o.in_chans, " mean and std values for in_chans ", o.in_chans, ", got ",
             o.mean.size(), " and ", o.std.size(), o.in_chans == 1 ? " (pass the grey dataset's own statistics)" : "");
    return ToTensorNormalize(o.mean, o.std);
  }

  Tensor operator()(const Image& src, SampleRng& rng) const {
    TS_CHECK(src.channels == 1 || src.channels == 3, "transform: expected an image with 1 or 3 channels, got ",
             src.channels);
    Image converted;
    const Image* in = &src;
    if (src.channels != opt.in_chans) {
      converted = opt.in_chans == 3 ? to_rgb(src) : to_grayscale(src);
      in = &converted;
    }
    const int64_t size = opt.img_size;
    if (!opt.is_training) return normalize(resize_center_crop(*in, eval_scale, size, interp));

    Image img;
    switch (primary) {
      case Primary::RandomResizedCrop: {
        const Box box = random_resized_crop_box(in->height, in->width, opt.scale, opt.ratio, rng);
        const Interpolation crop_interp =
            random_interp ? (rng.uniform() < 0.5 ? Interpolation::Bilinear : Interpolation::Bicubic) : interp;
        img = resized_crop(*in, box, size, size, crop_interp);
        break;
      }
      case Primary::CropPad: img = random_crop(*in, size, size, opt.crop_padding, pad_mode, {0, 0, 0}, rng); break;
      case Primary::ResizeCenterCrop:
        // timm's no-aug pipeline uses bilinear when the interpolation is "random".
        img = resize_center_crop(*in, size, size, random_interp ? Interpolation::Bilinear : interp);
        break;
    }
    if (opt.hflip > 0) random_hflip(img, opt.hflip, rng);
    if (opt.vflip > 0) random_vflip(img, opt.vflip, rng);
    if (rand_augment) {
      (*rand_augment)(img, rng);
    } else if (jitter) {
      (*jitter)(img, rng);
    }
    Tensor out = normalize(img);
    if (erasing) (*erasing)(out, rng);
    return out;
  }
};

}  // namespace

SampleTransform create_transform(const TransformOptions& options) {
  auto pipeline = std::make_shared<const Pipeline>(options);
  return [pipeline](const Image& img, SampleRng& rng) { return (*pipeline)(img, rng); };
}

}  // namespace tessera::data
