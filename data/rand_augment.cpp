// RandAugment (timm/data/auto_augment.py): config parsing, op arguments, sampling and
// application. Semantics in data/rand_augment.h.
#include "tessera/data/rand_augment.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "tessera/core/error.h"

namespace tessera::data {

namespace {

constexpr std::pair<const char*, AugmentOp> kOpNames[] = {
    {"AutoContrast", AugmentOp::AutoContrast},
    {"Equalize", AugmentOp::Equalize},
    {"Invert", AugmentOp::Invert},
    {"Rotate", AugmentOp::Rotate},
    {"Posterize", AugmentOp::Posterize},
    {"PosterizeIncreasing", AugmentOp::PosterizeIncreasing},
    {"PosterizeOriginal", AugmentOp::PosterizeOriginal},
    {"Solarize", AugmentOp::Solarize},
    {"SolarizeIncreasing", AugmentOp::SolarizeIncreasing},
    {"SolarizeAdd", AugmentOp::SolarizeAdd},
    {"Color", AugmentOp::Color},
    {"ColorIncreasing", AugmentOp::ColorIncreasing},
    {"Contrast", AugmentOp::Contrast},
    {"ContrastIncreasing", AugmentOp::ContrastIncreasing},
    {"Brightness", AugmentOp::Brightness},
    {"BrightnessIncreasing", AugmentOp::BrightnessIncreasing},
    {"Sharpness", AugmentOp::Sharpness},
    {"SharpnessIncreasing", AugmentOp::SharpnessIncreasing},
    {"ShearX", AugmentOp::ShearX},
    {"ShearY", AugmentOp::ShearY},
    {"TranslateX", AugmentOp::TranslateX},
    {"TranslateY", AugmentOp::TranslateY},
    {"TranslateXRel", AugmentOp::TranslateXRel},
    {"TranslateYRel", AugmentOp::TranslateYRel},
};

using A = AugmentOp;
// timm's _RAND_TRANSFORMS and _RAND_INCREASING_TRANSFORMS.
constexpr std::array kRandOps = {A::AutoContrast, A::Equalize,    A::Invert, A::Rotate,        A::Posterize,
                                 A::Solarize,     A::SolarizeAdd, A::Color,  A::Contrast,      A::Brightness,
                                 A::Sharpness,    A::ShearX,      A::ShearY, A::TranslateXRel, A::TranslateYRel};
constexpr std::array kRandIncreasingOps = {A::AutoContrast,
                                           A::Equalize,
                                           A::Invert,
                                           A::Rotate,
                                           A::PosterizeIncreasing,
                                           A::SolarizeIncreasing,
                                           A::SolarizeAdd,
                                           A::ColorIncreasing,
                                           A::ContrastIncreasing,
                                           A::BrightnessIncreasing,
                                           A::SharpnessIncreasing,
                                           A::ShearX,
                                           A::ShearY,
                                           A::TranslateXRel,
                                           A::TranslateYRel};
// timm's _RAND_WEIGHTED_0 ("tweights"), in its order.
constexpr std::pair<AugmentOp, double> kWeightedOps[] = {{A::Rotate, 3},
                                                         {A::ShearX, 2},
                                                         {A::ShearY, 2},
                                                         {A::TranslateXRel, 1},
                                                         {A::TranslateYRel, 1},
                                                         {A::ColorIncreasing, 0.25},
                                                         {A::SharpnessIncreasing, 0.25},
                                                         {A::AutoContrast, 0.25},
                                                         {A::SolarizeIncreasing, 0.05},
                                                         {A::SolarizeAdd, 0.05},
                                                         {A::ContrastIncreasing, 0.05},
                                                         {A::BrightnessIncreasing, 0.05},
                                                         {A::Equalize, 0.05},
                                                         {A::PosterizeIncreasing, 0.05},
                                                         {A::Invert, 0.05}};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = s.find(sep, begin);
    parts.push_back(s.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

int parse_int(const std::string& config, const std::string& section, const std::string& val) {
  int v = 0;
  const auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
  TS_CHECK(ec == std::errc() && ptr == val.data() + val.size(), "rand_augment: \"", config, "\": section \"", section,
           "\" needs an integer value, got \"", val, "\"");
  return v;
}

double parse_float(const std::string& config, const std::string& section, const std::string& val) {
  char* end = nullptr;
  const double v = std::strtod(val.c_str(), &end);
  TS_CHECK(end == val.c_str() + val.size() && std::isfinite(v), "rand_augment: \"", config, "\": section \"", section,
           "\" needs a number, got \"", val, "\"");
  return v;
}

}  // namespace

const char* augment_op_name(AugmentOp op) {
  for (const auto& [name, o] : kOpNames) {
    if (o == op) return name;
  }
  return "?";
}

AugmentOp parse_augment_op(const std::string& name) {
  for (const auto& [n, op] : kOpNames) {
    if (name == n) return op;
  }
  TS_CHECK(false, "augment op: unknown op \"", name, "\"");
  return AugmentOp::AutoContrast;
}

bool augment_op_signed(AugmentOp op) {
  switch (op) {
    case A::Rotate:
    case A::ColorIncreasing:
    case A::ContrastIncreasing:
    case A::BrightnessIncreasing:
    case A::SharpnessIncreasing:
    case A::ShearX:
    case A::ShearY:
    case A::TranslateX:
    case A::TranslateY:
    case A::TranslateXRel:
    case A::TranslateYRel: return true;
    default: return false;
  }
}

bool augment_op_geometric(AugmentOp op) {
  switch (op) {
    case A::Rotate:
    case A::ShearX:
    case A::ShearY:
    case A::TranslateX:
    case A::TranslateY:
    case A::TranslateXRel:
    case A::TranslateYRel: return true;
    default: return false;
  }
}

double augment_op_argument(AugmentOp op, double magnitude, bool negate, const AugmentHParams& hp) {
  const double level = magnitude / 10.0;  // timm's _LEVEL_DENOM
  const double sign = negate ? -1.0 : 1.0;
  auto truncate = [](double v) { return static_cast<double>(static_cast<int64_t>(v)); };  // Python int()
  switch (op) {
    case A::AutoContrast:
    case A::Equalize:
    case A::Invert: return 0.0;
    case A::Rotate: return sign * (level * 30.0);
    case A::Posterize: return truncate(level * 4);
    case A::PosterizeIncreasing: return 4 - truncate(level * 4);
    case A::PosterizeOriginal: return truncate(level * 4) + 4;
    case A::Solarize: return std::min(256.0, truncate(level * 256));
    case A::SolarizeIncreasing: return 256 - std::min(256.0, truncate(level * 256));
    case A::SolarizeAdd: return std::min(128.0, truncate(level * 110));
    case A::Color:
    case A::Contrast:
    case A::Brightness:
    case A::Sharpness: return level * 1.8 + 0.1;
    case A::ColorIncreasing:
    case A::ContrastIncreasing:
    case A::BrightnessIncreasing:
    case A::SharpnessIncreasing: return std::max(0.1, 1.0 + sign * (level * 0.9));
    case A::ShearX:
    case A::ShearY: return sign * (level * 0.3);
    case A::TranslateX:
    case A::TranslateY: return sign * (level * hp.translate_const);
    case A::TranslateXRel:
    case A::TranslateYRel: return sign * (level * hp.translate_pct);
  }
  return 0.0;
}

void apply_augment_op(Image& img, AugmentOp op, double arg, Interpolation interp, const Fill& fill) {
  switch (op) {
    case A::AutoContrast: autocontrast(img); return;
    case A::Equalize: equalize(img); return;
    case A::Invert: invert(img); return;
    case A::Rotate: img = rotate(img, arg, interp, fill); return;
    case A::Posterize:
    case A::PosterizeIncreasing:
    case A::PosterizeOriginal: posterize(img, static_cast<int>(arg)); return;
    case A::Solarize:
    case A::SolarizeIncreasing: solarize(img, static_cast<int>(arg)); return;
    case A::SolarizeAdd: solarize_add(img, static_cast<int>(arg), 128); return;
    case A::Color:
    case A::ColorIncreasing: enhance_color(img, arg); return;
    case A::Contrast:
    case A::ContrastIncreasing: enhance_contrast(img, arg); return;
    case A::Brightness:
    case A::BrightnessIncreasing: enhance_brightness(img, arg); return;
    case A::Sharpness:
    case A::SharpnessIncreasing: enhance_sharpness(img, arg); return;
    case A::ShearX: img = affine(img, {1, arg, 0, 0, 1, 0}, interp, fill); return;
    case A::ShearY: img = affine(img, {1, 0, 0, arg, 1, 0}, interp, fill); return;
    case A::TranslateX: img = affine(img, {1, 0, arg, 0, 1, 0}, interp, fill); return;
    case A::TranslateY: img = affine(img, {1, 0, 0, 0, 1, arg}, interp, fill); return;
    case A::TranslateXRel: img = affine(img, {1, 0, arg * img.width, 0, 1, 0}, interp, fill); return;
    case A::TranslateYRel: img = affine(img, {1, 0, 0, 0, 1, arg * img.height}, interp, fill); return;
  }
}

RandAugmentConfig parse_rand_augment(const std::string& config) {
  const std::vector<std::string> sections = split(config, '-');
  TS_CHECK(sections[0] == "rand", "rand_augment: \"", config,
           "\" must start with \"rand\" (e.g. \"rand-m9-mstd0.5-inc1\")");
  RandAugmentConfig cfg;
  bool have_set = false;
  for (size_t i = 1; i < sections.size(); ++i) {
    const std::string& c = sections[i];
    if (!c.empty() && c[0] == 't') {  // op set; the first one wins, as in timm
      if (!have_set) cfg.op_set = c.substr(1);
      have_set = true;
      continue;
    }
    const size_t digit = c.find_first_of("0123456789");
    TS_CHECK(digit != std::string::npos, "rand_augment: \"", config, "\": section \"", c,
             "\" has no value (expected m<int>, n<int>, p<float>, mstd<float>, mmax<int>, inc<int> or t<name>)");
    const std::string key = c.substr(0, digit), val = c.substr(digit);
    if (key == "mstd") {
      cfg.magnitude_std = parse_float(config, c, val);
      if (cfg.magnitude_std > 100) cfg.magnitude_std = std::numeric_limits<double>::infinity();
    } else if (key == "mmax") {
      const int mmax = parse_int(config, c, val);
      cfg.magnitude_max = mmax == 0 ? 10.0 : mmax;  // timm: `magnitude_max or _LEVEL_DENOM`
    } else if (key == "inc") {
      cfg.increasing = parse_int(config, c, val) != 0;
    } else if (key == "m") {
      cfg.magnitude = parse_int(config, c, val);
    } else if (key == "n") {
      cfg.num_layers = parse_int(config, c, val);
    } else if (key == "p") {
      cfg.prob = parse_float(config, c, val);
      TS_CHECK(cfg.prob >= 0 && cfg.prob <= 1, "rand_augment: \"", config, "\": probability p must be in [0, 1], got ",
               cfg.prob);
    } else if (key == "w") {
      TS_CHECK(val == "0", "rand_augment: \"", config, "\": the only legacy weight set is w0, got \"", c, "\"");
      if (!have_set) cfg.op_set = "weights";
      have_set = true;
    } else {
      TS_CHECK(false, "rand_augment: \"", config, "\": unknown section \"", c,
               "\" (expected m<int>, n<int>, p<float>, mstd<float>, mmax<int>, inc<int> or t<name>)");
    }
  }
  TS_CHECK(cfg.op_set.empty() || cfg.op_set == "weights", "rand_augment: \"", config, "\": unsupported op set \"t",
           cfg.op_set, "\" (supported: tweights)");
  return cfg;
}

RandAugment::RandAugment(const std::string& config, AugmentHParams hparams)
    : config_(parse_rand_augment(config)), hparams_(hparams) {
  if (config_.op_set == "weights") {
    for (const auto& [op, w] : kWeightedOps) {
      ops_.push_back(op);
      weights_.push_back(w);
    }
    TS_CHECK(config_.num_layers <= static_cast<int>(ops_.size()), "rand_augment: \"", config,
             "\": n = ", config_.num_layers, " ops cannot be drawn without replacement from ", ops_.size());
  } else {
    if (config_.increasing) ops_.assign(kRandIncreasingOps.begin(), kRandIncreasingOps.end());
    else ops_.assign(kRandOps.begin(), kRandOps.end());
  }
  TS_CHECK(config_.num_layers >= 0, "rand_augment: \"", config, "\": n must be >= 0, got ", config_.num_layers);
}

std::vector<RandAugment::Step> RandAugment::sample(SampleRng& rng) const {
  std::vector<Step> steps(config_.num_layers);
  // The ops first (numpy's choice), then each op's own draws, as timm does.
  if (weights_.empty()) {
    for (auto& s : steps) s.op = ops_[rng.randint(0, static_cast<int64_t>(ops_.size()) - 1)];
  } else {
    std::vector<double> w = weights_;
    for (auto& s : steps) {
      double total = 0;
      for (double v : w) total += v;
      const double u = rng.uniform() * total;
      size_t pick = 0;
      double cum = 0;
      for (size_t k = 0; k < w.size(); ++k) {
        if (w[k] <= 0) continue;
        pick = k;
        cum += w[k];
        if (u < cum) break;
      }
      s.op = ops_[pick];
      w[pick] = 0;
    }
  }
  const double m = config_.magnitude;
  for (auto& s : steps) {
    s.applied = config_.prob >= 1.0 || !(rng.uniform() > config_.prob);
    s.magnitude = m;
    s.negate = false;
    s.interp = hparams_.interpolation.value_or(Interpolation::Bicubic);
    if (!s.applied) continue;
    if (config_.magnitude_std > 0) {
      s.magnitude = std::isinf(config_.magnitude_std) ? rng.uniform(0, m) : rng.normal(m, config_.magnitude_std);
    }
    s.magnitude = std::max(0.0, std::min(s.magnitude, config_.magnitude_max));
    if (augment_op_signed(s.op)) s.negate = rng.uniform() > 0.5;
    if (augment_op_geometric(s.op) && !hparams_.interpolation) {
      s.interp = rng.uniform() < 0.5 ? Interpolation::Bilinear : Interpolation::Bicubic;
    }
  }
  return steps;
}

void RandAugment::apply(Image& img, const std::vector<Step>& steps) const {
  for (const Step& s : steps) {
    if (!s.applied) continue;
    apply_augment_op(img, s.op, augment_op_argument(s.op, s.magnitude, s.negate, hparams_), s.interp, hparams_.fill);
  }
}

}  // namespace tessera::data
