// What the training tests share: a synthetic dataset a small model learns in a few steps, and the
// options that read it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/data/dataset.h"
#include "tessera/train/trainer.h"

namespace tessera::testing {

// 28x28 gray images: class k is a bright 7x7 square in cell k of a 2x2 grid, on noise.
class Squares : public data::Dataset {
 public:
  explicit Squares(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  data::Sample get(int64_t i) const override {
    data::Sample s{data::Image(28, 28, 1), i % 4};
    for (int64_t p = 0; p < 28 * 28; ++p) s.image.pixels[p] = static_cast<uint8_t>((p * 37 + i * 11) % 64);
    const int64_t y0 = 3 + 14 * (s.label / 2), x0 = 3 + 14 * (s.label % 2);
    for (int64_t y = y0; y < y0 + 7; ++y)
      for (int64_t x = x0; x < x0 + 7; ++x) *s.image.at(y, x) = 230;
    return s;
  }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe(int64_t i) const override { return "squares[" + std::to_string(i) + "]"; }

 private:
  int64_t n_;
  std::vector<std::string> classes_{"a", "b", "c", "d"};
};

// Options that read one-channel images such as Squares' (mean and std 0.5, no resize) with one
// loader worker, writing to `output` (empty: nothing written), quiet. Each test sets its schedule
// and extras.
inline train::TrainOptions square_options(const std::string& output, int64_t batch) {
  train::TrainOptions o;
  o.eval_transform.in_chans = o.train_transform.in_chans = 1;
  o.eval_transform.mean = o.train_transform.mean = {0.5};
  o.eval_transform.std = o.train_transform.std = {0.5};
  o.eval_transform.crop_pct = 1.0;
  o.train_transform.primary = "crop_pad";
  o.loader.workers = 1;
  o.loader.batch_size = batch;
  o.output = output;
  o.verbose = false;
  return o;
}

}  // namespace tessera::testing
