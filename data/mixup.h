// Mixup and CutMix on a batch, with label-smoothed soft targets (timm/data/mixup.py: Mixup,
// mixup_target, rand_bbox, rand_bbox_minmax, cutmix_bbox_and_lam).
//
// The partner of sample i is sample B-1-i (timm mixes with x.flip(0)), so the batch size must be
// even. Per batch ("batch", the default), per pair of partners ("pair") or per sample ("elem"):
// with probability `prob` a lambda is drawn: when both alphas are > 0, CutMix with probability
// switch_prob (lambda ~ Beta(cutmix_alpha, cutmix_alpha)) else Mixup (Beta(mixup_alpha,
// mixup_alpha)); with only one alpha > 0, that one. Mixup: x = lam x + (1 - lam) x_partner.
// CutMix: a box of sides int(sqrt(1 - lam) * (H, W)) centred uniformly (clipped to the image),
// or with cutmix_minmax sides ~ U{int(min*S)..int(max*S)-1} placed inside the image, is copied
// from the partner; with correct_lam (or minmax) lam becomes 1 - box area / (H W).
// Targets: one-hot with off = smoothing / K and on = 1 - smoothing + off, then
// lam * y + (1 - lam) * y_partner, in float32 as timm computes them.
// Randomness comes from the SampleRng the caller passes (e.g. one per (seed, epoch, step)).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/data/image_ops.h"
#include "tessera/data/rng.h"

namespace tessera::data {

struct MixupOptions {
  double mixup_alpha = 1.0;
  double cutmix_alpha = 0.0;
  std::optional<std::array<double, 2>> cutmix_minmax;  // set: CutMix always, alpha forced to 1
  double prob = 1.0;                                   // probability of mixing a batch / pair / sample
  double switch_prob = 0.5;                            // probability of CutMix when both are enabled
  std::string mode = "batch";                          // "batch", "pair" or "elem"
  bool correct_lam = true;
  double label_smoothing = 0.1;
  int64_t num_classes = 1000;
};

// What happened to one sample (in "batch" mode every sample has the same entry).
struct MixInfo {
  double lam = 1.0;  // weight of the sample's own label in its target
  bool cutmix = false;
  Box box;  // the pasted region when cutmix (empty when the box was clipped away)
};

// timm's mixup_target: smoothed one-hot targets of `target` (int64 [B]) mixed with their flip.
// `lam` holds one value for the whole batch (used as a double, as timm's batch mode does) or one
// per sample (float32 values, as its pair/elem modes produce).
Tensor mixup_target(const Tensor& target, int64_t num_classes, const std::vector<double>& lam, double smoothing,
                    bool per_sample_float32 = false);

// A sample of Beta(a, a) (through two Gamma(a) draws, Marsaglia-Tsang).
double sample_beta(double a, SampleRng& rng);

class Mixup {
 public:
  explicit Mixup(MixupOptions options);

  // Mixes `images` (contiguous float32 [B, C, H, W], B even) in place and returns the soft
  // targets float32 [B, num_classes] for `target` (int64 [B], values in [0, num_classes)).
  // `info`, when given, receives one entry per sample.
  Tensor operator()(Tensor& images, const Tensor& target, SampleRng& rng, std::vector<MixInfo>* info = nullptr) const;

  // timm's mixup_enabled: when false, targets are only smoothed (train.py's --mixup-off-epoch).
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  const MixupOptions& options() const { return options_; }

 private:
  MixupOptions options_;
  bool enabled_ = true;
};

}  // namespace tessera::data
