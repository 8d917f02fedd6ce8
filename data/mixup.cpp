// Mixup / CutMix and mixup_target (timm/data/mixup.py); semantics in data/mixup.h.
#include "tessera/data/mixup.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tessera/core/error.h"

namespace tessera::data {

namespace {

// log of a Gamma(a, 1) sample: Marsaglia & Tsang (2000) for a >= 1; for a < 1,
// Gamma(a) = Gamma(a + 1) * U^(1/a), kept in log space so tiny alphas cannot underflow to 0/0.
double log_gamma_sample(double a, SampleRng& rng) {
  if (a < 1.0) return log_gamma_sample(a + 1.0, rng) + std::log(1.0 - rng.uniform()) / a;
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double x = rng.normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = 1.0 - rng.uniform();  // in (0, 1]
    if (u < 1.0 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) {
      return std::log(d) + std::log(v);
    }
  }
}

struct Draw {
  double lam = 1.0;
  bool cutmix = false;
};

// timm's _params_per_batch (also used per pair / per sample: the same distribution).
Draw draw_params(const MixupOptions& o, bool enabled, SampleRng& rng) {
  Draw d;
  if (!enabled || !(rng.uniform() < o.prob)) return d;
  const double cutmix_alpha = o.cutmix_minmax ? 1.0 : o.cutmix_alpha;
  if (o.mixup_alpha > 0 && cutmix_alpha > 0) {
    d.cutmix = rng.uniform() < o.switch_prob;
  } else {
    d.cutmix = cutmix_alpha > 0;
  }
  d.lam = sample_beta(d.cutmix ? cutmix_alpha : o.mixup_alpha, rng);
  return d;
}

// timm's cutmix_bbox_and_lam: the box, and lam corrected to the box area when asked.
Box cutmix_box(int64_t H, int64_t W, double& lam, const MixupOptions& o, SampleRng& rng) {
  int64_t yl, yh, xl, xh;
  if (o.cutmix_minmax) {
    const auto [lo, hi] = *o.cutmix_minmax;
    const auto h_lo = static_cast<int64_t>(H * lo), h_hi = static_cast<int64_t>(H * hi);
    const auto w_lo = static_cast<int64_t>(W * lo), w_hi = static_cast<int64_t>(W * hi);
    TS_CHECK(h_hi > h_lo && w_hi > w_lo, "mixup: cutmix_minmax (", lo, ", ", hi, ") gives no box size for a ", H, "x",
             W, " image");
    const int64_t cut_h = rng.randint(h_lo, h_hi - 1), cut_w = rng.randint(w_lo, w_hi - 1);
    yl = rng.randint(0, H - cut_h);
    xl = rng.randint(0, W - cut_w);
    yh = yl + cut_h;
    xh = xl + cut_w;
  } else {
    const double ratio = std::sqrt(1.0 - lam);
    const auto cut_h = static_cast<int64_t>(H * ratio), cut_w = static_cast<int64_t>(W * ratio);
    const int64_t cy = rng.randint(0, H - 1), cx = rng.randint(0, W - 1);
    yl = std::clamp<int64_t>(cy - cut_h / 2, 0, H);
    yh = std::clamp<int64_t>(cy + (cut_h + 1) / 2, 0, H);
    xl = std::clamp<int64_t>(cx - cut_w / 2, 0, W);
    xh = std::clamp<int64_t>(cx + (cut_w + 1) / 2, 0, W);
  }
  if (o.correct_lam || o.cutmix_minmax) {
    lam = 1.0 - static_cast<double>((yh - yl) * (xh - xl)) / static_cast<double>(H * W);
  }
  return {yl, xl, yh - yl, xh - xl};
}

struct Batch {
  float* data;
  int64_t B, C, H, W;
  float* sample(int64_t i) const { return data + i * C * H * W; }
  int64_t numel() const { return C * H * W; }
};

// Copies `box` of every channel from src into dst (both [C, H, W]); with swap, exchanges them.
void paste_box(float* dst, float* src, const Batch& b, const Box& box, bool swap) {
  for (int64_t c = 0; c < b.C; ++c) {
    for (int64_t y = box.top; y < box.top + box.height; ++y) {
      float* d = dst + (c * b.H + y) * b.W + box.left;
      float* s = src + (c * b.H + y) * b.W + box.left;
      if (swap) {
        std::swap_ranges(d, d + box.width, s);
      } else {
        std::memcpy(d, s, box.width * sizeof(float));
      }
    }
  }
}

// x_i, x_j <- x_i * a + x_j * b, x_j * a + x_i * b (the partners mixed with each other).
void mix_pair(float* xi, float* xj, int64_t n, float a, float b) {
  for (int64_t k = 0; k < n; ++k) {
    const float vi = xi[k], vj = xj[k];
    xi[k] = vi * a + vj * b;
    xj[k] = vj * a + vi * b;
  }
}

// The labels as a vector, after checking they are int64 [B] class indices in [0, num_classes).
std::vector<int64_t> checked_labels(const Tensor& target, int64_t num_classes, const char* op) {
  TS_CHECK(target.defined() && target.dim() == 1 && target.dtype() == DType::Int64, op,
           ": expected int64 class indices [B], got ", target.defined() ? describe(target) : "undefined");
  TS_CHECK(num_classes > 0, op, ": expected num_classes > 0, got ", num_classes);
  std::vector<int64_t> labels = target.to_vector<int64_t>();
  for (size_t i = 0; i < labels.size(); ++i) {
    TS_CHECK(labels[i] >= 0 && labels[i] < num_classes, op, ": label ", labels[i], " of sample ", i, " is outside [0, ",
             num_classes, ")");
  }
  return labels;
}

}  // namespace

double sample_beta(double a, SampleRng& rng) {
  TS_CHECK(a > 0 && std::isfinite(a), "mixup: expected a Beta parameter > 0, got ", a);
  const double lx = log_gamma_sample(a, rng), ly = log_gamma_sample(a, rng);
  return 1.0 / (1.0 + std::exp(ly - lx));  // X / (X + Y)
}

Tensor mixup_target(const Tensor& target, int64_t num_classes, const std::vector<double>& lam, double smoothing,
                    bool per_sample_float32) {
  const std::vector<int64_t> labels = checked_labels(target, num_classes, "mixup_target");
  TS_CHECK(smoothing >= 0 && smoothing <= 1, "mixup_target: expected smoothing in [0, 1], got ", smoothing);
  const int64_t B = target.size(0);
  TS_CHECK(lam.size() == 1 || static_cast<int64_t>(lam.size()) == B, "mixup_target: expected 1 or ", B,
           " lambda values, got ", lam.size());
  const double off_d = smoothing / static_cast<double>(num_classes);
  const float off = static_cast<float>(off_d), on = static_cast<float>(1.0 - smoothing + off_d);
  Tensor out = Tensor::empty({B, num_classes}, DType::Float32);
  float* o = out.data<float>();
  for (int64_t i = 0; i < B; ++i) {
    const double l = lam.size() == 1 ? lam[0] : lam[i];
    // Batch mode multiplies by the Python floats lam and 1 - lam; pair/elem modes by a float32
    // lam tensor and 1 - lam computed in float32.
    const float a = static_cast<float>(l);
    const float b = per_sample_float32 ? 1.0f - a : static_cast<float>(1.0 - l);
    const int64_t y1 = labels[i], y2 = labels[B - 1 - i];
    float* row = o + i * num_classes;
    for (int64_t k = 0; k < num_classes; ++k) { row[k] = (k == y1 ? on : off) * a + (k == y2 ? on : off) * b; }
  }
  return out;
}

Mixup::Mixup(MixupOptions options) : options_(std::move(options)) {
  const MixupOptions& o = options_;
  TS_CHECK(o.mode == "batch" || o.mode == "pair" || o.mode == "elem",
           "mixup: expected mode \"batch\", \"pair\" or \"elem\", got \"", o.mode, "\"");
  TS_CHECK(o.mixup_alpha >= 0 && o.cutmix_alpha >= 0, "mixup: expected alphas >= 0, got mixup ", o.mixup_alpha,
           " and cutmix ", o.cutmix_alpha);
  TS_CHECK(o.mixup_alpha > 0 || o.cutmix_alpha > 0 || o.cutmix_minmax,
           "mixup: one of mixup_alpha > 0, cutmix_alpha > 0 or cutmix_minmax must be set");
  TS_CHECK(o.prob >= 0 && o.prob <= 1 && o.switch_prob >= 0 && o.switch_prob <= 1,
           "mixup: expected prob and switch_prob in [0, 1], got ", o.prob, " and ", o.switch_prob);
  TS_CHECK(o.num_classes > 0, "mixup: expected num_classes > 0, got ", o.num_classes);
  TS_CHECK(o.label_smoothing >= 0 && o.label_smoothing < 1, "mixup: expected label_smoothing in [0, 1), got ",
           o.label_smoothing);
  if (o.cutmix_minmax) {
    const auto [lo, hi] = *o.cutmix_minmax;
    TS_CHECK(lo >= 0 && lo < hi && hi <= 1, "mixup: expected 0 <= cutmix_minmax[0] < cutmix_minmax[1] <= 1, got (", lo,
             ", ", hi, ")");
  }
}

Tensor Mixup::operator()(Tensor& images, const Tensor& target, SampleRng& rng, std::vector<MixInfo>* info) const {
  TS_CHECK(images.defined() && images.dim() == 4 && images.dtype() == DType::Float32 && images.is_contiguous(),
           "mixup: expected contiguous float32 images [B, C, H, W], got ",
           images.defined() ? describe(images) : "undefined");
  const Batch b{images.data<float>(), images.size(0), images.size(1), images.size(2), images.size(3)};
  TS_CHECK(b.B % 2 == 0, "mixup: the batch size must be even (sample i is mixed with sample B-1-i), got ", b.B);
  checked_labels(target, options_.num_classes, "mixup");  // before anything is modified
  TS_CHECK(target.size(0) == b.B, "mixup: expected ", b.B, " labels for images ", images.shape(), ", got ",
           describe(target));
  const MixupOptions& o = options_;
  std::vector<MixInfo> mixes(b.B);
  std::vector<double> lam;
  bool per_sample = false;
  if (o.mode == "batch") {
    Draw d = draw_params(o, enabled_, rng);
    MixInfo m;
    if (d.lam != 1.0) {
      m.cutmix = d.cutmix;
      if (d.cutmix) {
        m.box = cutmix_box(b.H, b.W, d.lam, o, rng);
        for (int64_t i = 0; i < b.B / 2; ++i) paste_box(b.sample(i), b.sample(b.B - 1 - i), b, m.box, true);
      } else {
        const auto a = static_cast<float>(d.lam), c = static_cast<float>(1.0 - d.lam);
        for (int64_t i = 0; i < b.B / 2; ++i) mix_pair(b.sample(i), b.sample(b.B - 1 - i), b.numel(), a, c);
      }
    }
    m.lam = d.lam;
    std::fill(mixes.begin(), mixes.end(), m);
    lam = {d.lam};
  } else {
    per_sample = true;
    const bool pair = o.mode == "pair";
    // elem mixes every sample with its partner's original, so keep a copy of the batch.
    std::vector<float> original;
    if (!pair) original.assign(b.data, b.data + b.B * b.numel());
    const int64_t draws = pair ? b.B / 2 : b.B;
    for (int64_t i = 0; i < draws; ++i) {
      const int64_t j = b.B - 1 - i;
      Draw d = draw_params(o, enabled_, rng);
      double l = static_cast<float>(d.lam);  // timm keeps these lambdas in a float32 array
      MixInfo m;
      if (l != 1.0) {
        m.cutmix = d.cutmix;
        if (d.cutmix) {
          m.box = cutmix_box(b.H, b.W, l, o, rng);
          l = static_cast<float>(l);
          if (pair) {
            paste_box(b.sample(i), b.sample(j), b, m.box, true);
          } else {
            paste_box(b.sample(i), original.data() + j * b.numel(), b, m.box, false);
          }
        } else {
          const auto a = static_cast<float>(l), c = 1.0f - a;
          if (pair) {
            mix_pair(b.sample(i), b.sample(j), b.numel(), a, c);
          } else {
            float* xi = b.sample(i);
            const float* xj = original.data() + j * b.numel();
            for (int64_t k = 0; k < b.numel(); ++k) xi[k] = xi[k] * a + xj[k] * c;
          }
        }
      }
      m.lam = l;
      mixes[i] = m;
      if (pair) mixes[j] = m;
    }
    lam.resize(b.B);
    for (int64_t i = 0; i < b.B; ++i) lam[i] = mixes[i].lam;
  }
  if (info) *info = std::move(mixes);
  return mixup_target(target, o.num_classes, lam, o.label_smoothing, per_sample);
}

}  // namespace tessera::data
