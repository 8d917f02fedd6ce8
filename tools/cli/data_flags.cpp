// Dataset and transform flags; see tools/cli/data_flags.h.
#include "tools/cli/data_flags.h"

#include <sstream>

#include "tessera/data/transforms.h"

namespace tessera::cli {

namespace {

// "0.5,0.5,0.5" -> {0.5, 0.5, 0.5}
std::vector<double> parse_list(const std::string& flag, const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw UsageError("option " + flag + ": expected comma-separated numbers, got '" + text + "'");
    }
  }
  return out;
}

bool is_grayscale_dataset(const std::string& name) { return name.find("mnist") != std::string::npos; }

}  // namespace

void add_data_options(ArgParser& p) {
  p.option("--dataset", "NAME",
           "folder (ImageFolder), mnist, fashion_mnist, cifar10 or cifar100; with --data-dir alone, what DIR holds",
           "fashion_mnist");
  p.option("--data-dir", "DIR", "dataset root (fashion_mnist: /usr/share/datasets/fashion-mnist when empty)");
  p.option("--workers", "N",
           "data loading threads; -1: sized for the machine (every core but one when feeding a GPU, a quarter of "
           "them on the CPU; docs/training.md)",
           "-1", "-j");
  p.option("--interpolation", "MODE", "resize interpolation: bilinear or bicubic", "bicubic");
  p.option("--crop-pct", "PCT", "evaluation: resize to img_size / crop_pct, then center crop", "0.875");
  p.option("--mean", "M,...", "normalization mean per channel (default: ImageNet's; their average for 1 channel)");
  p.option("--std", "S,...", "normalization std per channel (default: ImageNet's; their average for 1 channel)");
  p.flag("--strict-data", "a corrupt image is an error instead of being skipped");
  p.option("--max-image-pixels", "N", "refuse images whose header claims more pixels (PIL's decompression-bomb limit)",
           std::to_string(data::kDefaultMaxImagePixels));
}

std::vector<ConfigKey> data_config_keys() {
  using T = ConfigType;
  return {{"dataset", T::String},       {"data_dir", T::String},    {"workers", T::Int},
          {"interpolation", T::String}, {"crop_pct", T::Float},     {"mean", T::Numbers},
          {"std", T::Numbers},          {"strict_data", T::Switch}, {"max_image_pixels", T::Int}};
}

data::DetectedDataset resolve_dataset(const ArgParser& p) {
  if (p.given("--dataset") || p.get("--data-dir").empty()) return {p.get("--dataset"), ""};
  return data::detect_dataset(p.get("--data-dir"));
}

int64_t resolve_in_chans(const ArgParser& p) {
  if (p.given("--in-chans")) return p.get_int("--in-chans");
  return is_grayscale_dataset(resolve_dataset(p).name) ? 1 : 3;
}

data::TransformOptions eval_transform_options(const ArgParser& p, int64_t in_chans) {
  const int64_t max_pixels = p.get_int("--max-image-pixels");
  if (max_pixels < 1)
    throw UsageError("option --max-image-pixels: expected a positive pixel count, got " + std::to_string(max_pixels));
  data::set_max_image_pixels(max_pixels);
  data::TransformOptions t;
  t.in_chans = in_chans;
  t.interpolation = p.get("--interpolation");
  t.crop_pct = p.get_double("--crop-pct");
  if (!(t.crop_pct > 0 && t.crop_pct <= 1))
    throw UsageError("option --crop-pct: expected a fraction in (0, 1], got " + p.get("--crop-pct"));
  auto channels = [&](const std::string& flag, const std::vector<double>& imagenet) {
    if (!p.get(flag).empty()) {
      std::vector<double> v = parse_list(flag, p.get(flag));
      if (static_cast<int64_t>(v.size()) != in_chans)
        throw UsageError(detail::concat("option ", flag, ": expected ", in_chans,
                                        " values (one per input channel), got ", v.size()));
      return v;
    }
    if (in_chans == 3) return imagenet;
    return std::vector<double>(in_chans, (imagenet[0] + imagenet[1] + imagenet[2]) / 3.0);
  };
  t.mean = channels("--mean", data::imagenet_mean());
  t.std = channels("--std", data::imagenet_std());
  return t;
}

std::shared_ptr<data::Dataset> open_dataset_from_flags(const ArgParser& p, const std::string& split, int64_t in_chans) {
  return data::open_dataset(resolve_dataset(p).name, p.get("--data-dir"), split, in_chans);
}

}  // namespace tessera::cli
