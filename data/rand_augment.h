// RandAugment as timm implements it (timm/data/auto_augment.py, timm 1.0.31), configured by
// timm's strings such as "rand-m9-mstd0.5-inc1" (the DeiT / CaiT / XCiT recipe).
//
// Config string: "rand" followed by '-'-separated sections, each a key and a value:
//   m<int>     magnitude (default 10)            n<int>    ops per image (default 2)
//   p<float>   probability of each op (0.5)      mstd<f>   magnitude noise std (0); > 100 means
//                                                          uniform in [0, m]
//   mmax<int>  magnitude clip (default 10)       inc<int>  1: the "Increasing" op set
//   t<name>    op set: "weights" = weighted choice without replacement (_RAND_WEIGHTED_0)
//   w0         legacy spelling of tweights (older timm; timm 1.0 rejects it)
// Anything else (unknown key, missing or malformed value, bad range) throws, naming the string.
// timm >= 0.9 reads inc with bool(int(v)), so inc0 is off (older timm: any inc section is on).
//
// Per image: n ops are drawn uniformly with replacement (weighted sets: without replacement);
// each is applied with probability p at magnitude m' = clip(N(m, mstd), 0, mmax) (plain m when
// mstd = 0); ops with a signed argument negate it with probability 1/2; geometric ops use the
// configured interpolation, or bilinear/bicubic at random when none is set (timm's "random").
// Op arguments at level L = m' / 10 (timm's level_to_arg functions):
//   Rotate 30L deg | ShearX/Y 0.3L | TranslateX/YRel translate_pct*L*size px |
//   TranslateX/Y translate_const*L px | Posterize bits int(4L), Increasing 4-int(4L),
//   Original int(4L)+4 | Solarize thr min(256,int(256L)), Increasing 256-that |
//   SolarizeAdd min(128,int(110L)) below 128 | Color/Contrast/Brightness/Sharpness 1.8L+0.1,
//   Increasing max(0.1, 1 +- 0.9L) | AutoContrast, Equalize, Invert: none.
// Geometric ops fill uncovered pixels with hparams.fill (timm: the dataset mean * 255).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/data/image.h"
#include "tessera/data/image_ops.h"
#include "tessera/data/rng.h"

namespace tessera::data {

enum class AugmentOp : uint8_t {
  AutoContrast,
  Equalize,
  Invert,
  Rotate,
  Posterize,
  PosterizeIncreasing,
  PosterizeOriginal,
  Solarize,
  SolarizeIncreasing,
  SolarizeAdd,
  Color,
  ColorIncreasing,
  Contrast,
  ContrastIncreasing,
  Brightness,
  BrightnessIncreasing,
  Sharpness,
  SharpnessIncreasing,
  ShearX,
  ShearY,
  TranslateX,
  TranslateY,
  TranslateXRel,
  TranslateYRel,
};

// timm's op names ("PosterizeIncreasing", ...), and back (throws for an unknown name).
const char* augment_op_name(AugmentOp op);
AugmentOp parse_augment_op(const std::string& name);
// Whether the op's argument has a random sign (Rotate, Shear*, Translate*, *Increasing enhance).
bool augment_op_signed(AugmentOp op);
// Whether the op resamples (and so uses the interpolation and the fill colour).
bool augment_op_geometric(AugmentOp op);

// The hyper-parameters timm passes to the ops (transforms_factory.py: aa_params).
struct AugmentHParams {
  Fill fill = {128, 128, 128};                 // img_mean = round(255 * mean); 1-channel images use fill[0]
  double translate_pct = 0.45;                 // TranslateX/YRel at level 1, as a fraction of the image side
  double translate_const = 250;                // TranslateX/Y at level 1, in pixels (int(img_size * 0.45))
  std::optional<Interpolation> interpolation;  // unset: bilinear or bicubic at random per op
};

// The op's argument (degrees, bits, threshold, add, enhance factor, shear, translate fraction
// or pixels) at `magnitude`, negated when `negate` and the op is signed. Argument-free ops
// return 0.
double augment_op_argument(AugmentOp op, double magnitude, bool negate, const AugmentHParams& hp);

// Applies `op` with its argument (as augment_op_argument returns it) to `img`: exactly timm's
// op function on a PIL image.
void apply_augment_op(Image& img, AugmentOp op, double argument, Interpolation interp, const Fill& fill);

struct RandAugmentConfig {
  int magnitude = 10;
  int num_layers = 2;
  double prob = 0.5;
  double magnitude_std = 0.0;  // +infinity: uniform in [0, magnitude]
  double magnitude_max = 10.0;
  bool increasing = false;
  std::string op_set;  // "" (standard or increasing) or "weights"
};

// Parses a timm RandAugment string; throws tessera::Error naming the string and the section.
RandAugmentConfig parse_rand_augment(const std::string& config);

class RandAugment {
 public:
  explicit RandAugment(const std::string& config, AugmentHParams hparams = {});

  // One op of a drawn policy: what to apply and how.
  struct Step {
    AugmentOp op;
    bool applied;      // passed its probability test
    double magnitude;  // after noise and clipping
    bool negate;
    Interpolation interp;
  };
  // The random part of one application (num_layers steps), then its deterministic part.
  std::vector<Step> sample(SampleRng& rng) const;
  void apply(Image& img, const std::vector<Step>& steps) const;
  void operator()(Image& img, SampleRng& rng) const { apply(img, sample(rng)); }

  const RandAugmentConfig& config() const { return config_; }
  const AugmentHParams& hparams() const { return hparams_; }
  const std::vector<AugmentOp>& ops() const { return ops_; }
  const std::vector<double>& weights() const { return weights_; }  // empty: uniform, with replacement

 private:
  RandAugmentConfig config_;
  AugmentHParams hparams_;
  std::vector<AugmentOp> ops_;
  std::vector<double> weights_;
};

}  // namespace tessera::data
