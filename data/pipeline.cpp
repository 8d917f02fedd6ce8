// create_transform: timm's train / eval pipelines from TransformOptions (data/pipeline.h).
#include "tessera/data/pipeline.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "tessera/core/error.h"
#include "tessera/data/rand_augment.h"
#include "tessera/data/stage_clock.h"

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

  // The image in the model's channel count, as PIL's convert("RGB") / convert("L") (timm opens
  // images in the mode in_chans implies).
  Image in_channels(Image img) const {
    TS_CHECK(img.channels == 1 || img.channels == 3, "transform: expected an image with 1 or 3 channels, got ",
             img.channels);
    if (img.channels == opt.in_chans) return img;
    return opt.in_chans == 3 ? to_rgb(img) : to_grayscale(img);
  }

  // The pixels a resample of `region` to out_h x out_w needs (reduced, and only around the region,
  // where a JPEG allows: data/encoded_image.h), in the model's channel count.
  EncodedImage::Reduced decoded_for(const EncodedImage& src, const Box& region, int64_t out_h, int64_t out_w) const {
    StageTimer timer(Stage::Decode);
    EncodedImage::Reduced r = src.decode_for(region, out_h, out_w);
    r.image = in_channels(std::move(r.image));
    return r;
  }
  Image decoded(const EncodedImage& src) const {
    StageTimer timer(Stage::Decode);
    return in_channels(src.decode());
  }

  // Resize of the shorter side to scale_size and center crop of img_size, decoding the image
  // reduced for that resize where it can: the geometry is the full-size image's, the window
  // mapped onto the reduced one.
  Image resize_center_crop_decoding(const EncodedImage& src, int64_t scale_size, Interpolation how) const {
    const int64_t size = opt.img_size;
    const auto [h, w] = shorter_side_size(src.height(), src.width(), scale_size);
    const Box box = center_crop_box(h, w, size, size);
    if (box.top < 0 || box.left < 0 || box.top + box.height > h || box.left + box.width > w) {
      const Image img = decoded(src);  // padded (an image smaller than the crop): rare, full size
      StageTimer timer(Stage::Resample);
      return resize_center_crop(img, scale_size, size, how);
    }
    const EncodedImage::Reduced r = decoded_for(src, Box{0, 0, src.height(), src.width()}, h, w);
    StageTimer timer(Stage::Resample);
    if (r.scale == 1.0) return resize_center_crop(r.image, scale_size, size, how);  // (the whole image: top, left 0)
    const Window whole{0.0, 0.0, static_cast<double>(src.height()) * r.scale,
                       static_cast<double>(src.width()) * r.scale};
    return resized_crop_fractional(r.image, whole, h, w, how, &box);
  }

  // RandomResizedCrop: the box from the header's size, as from the decoded image's, then the
  // decode reduced for it, of the part around it, and the box resampled from that part.
  Image random_resized_crop_decoding(const EncodedImage& src, SampleRng& rng) const {
    const int64_t size = opt.img_size;
    const Box box = random_resized_crop_box(src.height(), src.width(), opt.scale, opt.ratio, rng);
    const Interpolation how =
        random_interp ? (rng.uniform() < 0.5 ? Interpolation::Bilinear : Interpolation::Bicubic) : interp;
    const EncodedImage::Reduced r = decoded_for(src, box, size, size);
    StageTimer timer(Stage::Resample);
    if (r.scale == 1.0)
      return resized_crop(r.image, {box.top - r.top, box.left - r.left, box.height, box.width}, size, size, how);
    const double f = r.scale;
    const Window window{static_cast<double>(box.top) * f - static_cast<double>(r.top),
                        static_cast<double>(box.left) * f - static_cast<double>(r.left),
                        static_cast<double>(box.height) * f, static_cast<double>(box.width) * f};
    return resized_crop_fractional(r.image, window, size, size, how);
  }

  void normalize_into(const Image& img, float* out) const {
    StageTimer timer(Stage::Normalize);
    TS_CHECK(img.height == opt.img_size && img.width == opt.img_size, "transform: the pipeline made a ", img.height,
             "x", img.width, " image, not ", opt.img_size, "x", opt.img_size, " (internal error)");
    normalize.write(img, out);
  }

  // The sample into `out`, [in_chans, img_size, img_size] floats.
  void operator()(const EncodedImage& src, SampleRng& rng, float* out) const {
    const int64_t size = opt.img_size;
    if (!opt.is_training) return normalize_into(resize_center_crop_decoding(src, eval_scale, interp), out);

    Image img;
    switch (primary) {
      case Primary::RandomResizedCrop: img = random_resized_crop_decoding(src, rng); break;
      case Primary::CropPad: {
        const Image in = decoded(src);
        StageTimer timer(Stage::Resample);
        img = random_crop(in, size, size, opt.crop_padding, pad_mode, {0, 0, 0}, rng);
        break;
      }
      case Primary::ResizeCenterCrop:
        // timm's no-aug pipeline uses bilinear when the interpolation is "random".
        img = resize_center_crop_decoding(src, size, random_interp ? Interpolation::Bilinear : interp);
        break;
    }
    {
      StageTimer timer(Stage::Augment);
      if (opt.hflip > 0) random_hflip(img, opt.hflip, rng);
      if (opt.vflip > 0) random_vflip(img, opt.vflip, rng);
      if (rand_augment) {
        (*rand_augment)(img, rng);
      } else if (jitter) {
        (*jitter)(img, rng);
      }
    }
    normalize_into(img, out);
    if (erasing) {
      StageTimer timer(Stage::Augment);
      erasing->erase(out, opt.in_chans, size, size, rng);
    }
  }
};

}  // namespace

SampleTransform create_transform(const TransformOptions& options) {
  auto pipeline = std::make_shared<const Pipeline>(options);
  return SampleTransform(
      {options.in_chans, options.img_size, options.img_size},
      [pipeline](const EncodedImage& img, SampleRng& rng, float* out) { (*pipeline)(img, rng, out); });
}

}  // namespace tessera::data
