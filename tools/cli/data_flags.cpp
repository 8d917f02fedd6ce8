// Dataset and transform flags; see tools/cli/data_flags.h.
#include "tools/cli/data_flags.h"

#include <sstream>
#include <type_traits>

#include "tessera/data/decode.h"
#include "tessera/data/transforms.h"
#include "tessera/train/trainer.h"

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

// The evaluation crop's fraction, in (0, 1].
struct CropPctText {
  static constexpr ConfigType type = ConfigType::Float;
  static std::string text(double v) { return number_text(v); }
  static double parse(const std::string& flag, const std::string&, const std::string& text) {
    const double v = parse_double(flag, text);
    if (!(v > 0 && v <= 1)) throw UsageError("option " + flag + ": expected a fraction in (0, 1], got " + text);
    return v;
  }
};

// --mean / --std: one value per input channel. Their default depends on the channels (ImageNet's
// for 3, their average for any other number), so the flag's default is empty, not the member's
// (ImageNet's three), and the row sets the member for the channels of the transform.
template <class Root>
OptionRow<Root> channels_row(std::string flag, std::string metavar, std::string help, const std::string& consumer,
                             std::vector<double> data::TransformOptions::*member, std::vector<double> (*imagenet)()) {
  OptionRow<Root> row = unbound<Root>(flag, std::move(metavar), std::move(help), consumer, ConfigType::Numbers);
  row.set = [flag, member, imagenet](Root& o, const ArgParser& p) {
    data::TransformOptions& t = o.eval_transform;
    const std::vector<double> rgb = imagenet();
    if (p.get(flag).empty()) {
      t.*member = t.in_chans == 3 ? rgb : std::vector<double>(t.in_chans, (rgb[0] + rgb[1] + rgb[2]) / 3.0);
      return;
    }
    std::vector<double> v = parse_list(flag, p.get(flag));
    if (static_cast<int64_t>(v.size()) != t.in_chans)
      throw UsageError(detail::concat("option ", flag, ": expected ", t.in_chans,
                                      " values (one per input channel), got ", v.size()));
    t.*member = std::move(v);
  };
  return row;
}

template <class Root>
std::vector<OptionRow<Root>> make_table() {
  using L = data::LoaderOptions;
  using T = data::TransformOptions;
  using C = ConfigType;
  const std::string root = std::is_same_v<Root, DataOptions> ? "DataOptions" : "TrainOptions";
  return {
      unbound<Root>(
          "--dataset", "NAME",
          "folder (ImageFolder), mnist, fashion_mnist, cifar10 or cifar100; with --data-dir alone, what DIR holds",
          "resolve_dataset (data_flags.h)", C::String, "fashion_mnist"),
      unbound<Root>("--data-dir", "DIR", "dataset root (fashion_mnist: /usr/share/datasets/fashion-mnist when empty)",
                    "open_dataset_from_flags (data_flags.h)", C::String),
      with_alias(bound<Root>("--workers", "N",
                             "data loading threads; -1: sized for the machine (every core but one when feeding a GPU, "
                             "a quarter of them on the CPU; docs/training.md)",
                             root + "::loader.workers", &Root::loader, &L::workers),
                 "-j"),
      bound<Root>("--interpolation", "MODE", "resize interpolation: bilinear or bicubic",
                  root + "::eval_transform.interpolation", &Root::eval_transform, &T::interpolation),
      bound<Root, CropPctText>("--crop-pct", "PCT", "evaluation: resize to img_size / crop_pct, then center crop",
                               root + "::eval_transform.crop_pct", &Root::eval_transform, &T::crop_pct),
      channels_row<Root>("--mean", "M,...",
                         "normalization mean per channel (default: ImageNet's; their average for 1 channel)",
                         root + "::eval_transform.mean", &T::mean, data::imagenet_mean),
      channels_row<Root>("--std", "S,...",
                         "normalization std per channel (default: ImageNet's; their average for 1 channel)",
                         root + "::eval_transform.std", &T::std, data::imagenet_std),
      bound<Root>("--strict-data", "", "a corrupt image is an error instead of being skipped", root + "::loader.strict",
                  &Root::loader, &L::strict),
      // Process-wide (data/decode.h), not an option of one loader: apply_data_options sets it.
      unbound<Root>("--max-image-pixels", "N",
                    "refuse images whose header claims more pixels (PIL's decompression-bomb limit)",
                    "data::set_max_image_pixels", C::Int, std::to_string(data::kDefaultMaxImagePixels)),
  };
}

}  // namespace

template <class Root>
const std::vector<OptionRow<Root>>& data_option_table() {
  static const std::vector<OptionRow<Root>> table = make_table<Root>();
  return table;
}

template <class Root>
void apply_data_options(const ArgParser& p, Root& o) {
  const int64_t max_pixels = p.get_int("--max-image-pixels");
  if (max_pixels < 1)
    throw UsageError("option --max-image-pixels: expected a positive pixel count, got " + std::to_string(max_pixels));
  data::set_max_image_pixels(max_pixels);
  apply_options(p, data_option_table<Root>(), o);
}

template const std::vector<OptionRow<DataOptions>>& data_option_table<DataOptions>();
template const std::vector<OptionRow<train::TrainOptions>>& data_option_table<train::TrainOptions>();
template void apply_data_options(const ArgParser& p, DataOptions& o);
template void apply_data_options(const ArgParser& p, train::TrainOptions& o);

void add_data_options(ArgParser& p) { add_options(p, data_option_table<DataOptions>()); }

std::vector<ConfigKey> data_config_keys() { return config_keys(data_option_table<DataOptions>()); }

data::DetectedDataset resolve_dataset(const ArgParser& p) {
  if (p.given("--dataset") || p.get("--data-dir").empty()) return {p.get("--dataset"), ""};
  return data::detect_dataset(p.get("--data-dir"));
}

int64_t resolve_in_chans(const ArgParser& p) {
  if (p.given("--in-chans")) return p.get_int("--in-chans");
  return is_grayscale_dataset(resolve_dataset(p).name) ? 1 : 3;
}

data::TransformOptions eval_transform_options(const ArgParser& p, int64_t in_chans) {
  DataOptions d;
  d.eval_transform.in_chans = in_chans;
  apply_data_options(p, d);
  return d.eval_transform;
}

std::shared_ptr<data::Dataset> open_dataset_from_flags(const ArgParser& p, const std::string& split, int64_t in_chans) {
  return data::open_dataset(resolve_dataset(p).name, p.get("--data-dir"), split, in_chans);
}

}  // namespace tessera::cli
