// cross_entropy / soft_cross_entropy: values against naive −log softmax loops, the label-smoothing
// formula, PyTorch reference values, large-logit stability, and errors naming bad target values and
// their positions. The float64 gradient checks w.r.t. logits and soft targets are samples of the op
// table, tests/op_samples/loss.cpp.
#include <cmath>

#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

Tensor random(const Shape& shape, double scale, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, DType::Float64, &gen) * scale;
}

// log softmax of row r of a row-major [N, C] buffer, naive.
std::vector<double> log_probs(const std::vector<double>& x, int64_t C, int64_t r) {
  double m = x[r * C];
  for (int64_t c = 1; c < C; ++c) m = std::max(m, x[r * C + c]);
  double se = 0;
  for (int64_t c = 0; c < C; ++c) se += std::exp(x[r * C + c] - m);
  std::vector<double> out(C);
  for (int64_t c = 0; c < C; ++c) out[c] = x[r * C + c] - m - std::log(se);
  return out;
}

// mean_i Σ_c −q_ic·log softmax(x_i)_c, q = (1−ε)·onehot(t) + ε/C.
double naive_ce(const Tensor& logits, const std::vector<int64_t>& t, double eps) {
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  std::vector<double> x = logits.to_vector<double>();
  double total = 0;
  for (int64_t r = 0; r < N; ++r) {
    std::vector<double> lp = log_probs(x, C, r);
    for (int64_t c = 0; c < C; ++c) total -= ((c == t[r] ? 1 - eps : 0) + eps / C) * lp[c];
  }
  return total / N;
}

double naive_soft_ce(const Tensor& logits, const Tensor& probs) {
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  std::vector<double> x = logits.to_vector<double>(), p = probs.to_vector<double>();
  double total = 0;
  for (int64_t r = 0; r < N; ++r) {
    std::vector<double> lp = log_probs(x, C, r);
    for (int64_t c = 0; c < C; ++c) total -= p[r * C + c] * lp[c];
  }
  return total / N;
}

}  // namespace

TEST_CASE("cross_entropy equals mean −log softmax[target], with label smoothing", "[loss]") {
  Tensor logits = random({6, 5}, 2.0, 1);
  std::vector<int64_t> t{0, 4, 2, 2, 1, 3};
  Tensor target = from_vector(t, {6});
  CHECK(cross_entropy(logits, target).item() == Approx(naive_ce(logits, t, 0.0)).epsilon(1e-14));
  for (double eps : {0.1, 0.5, 1.0})
    CHECK(cross_entropy(logits, target, eps).item() == Approx(naive_ce(logits, t, eps)).epsilon(1e-14));
  CHECK(cross_entropy(logits, target).dim() == 0);

  // PyTorch 1.13 reference values:
  //   l = torch.tensor([[1., 2., .5], [-1., 0., 3.]], dtype=torch.float64); t = torch.tensor([2, 0])
  //   F.cross_entropy(l, t)                      -> 3.015126343932687
  //   F.cross_entropy(l, t, label_smoothing=0.1) -> 2.8984596772660205
  Tensor l = from_vector(std::vector<double>{1, 2, 0.5, -1, 0, 3}, {2, 3});
  Tensor tt = from_vector(std::vector<int64_t>{2, 0}, {2});
  CHECK(cross_entropy(l, tt).item() == Approx(3.015126343932687).epsilon(1e-14));
  CHECK(cross_entropy(l, tt, 0.1).item() == Approx(2.8984596772660205).epsilon(1e-14));
  CHECK(cross_entropy(l.to(DType::Float32), tt, 0.1).item() == Approx(2.8984596772660205).epsilon(1e-6));
}

TEST_CASE("soft_cross_entropy equals timm's SoftTargetCrossEntropy", "[loss]") {
  Tensor logits = random({4, 7}, 2.0, 2);
  Tensor probs = softmax(random({4, 7}, 1.0, 3), 1);
  CHECK(soft_cross_entropy(logits, probs).item() == Approx(naive_soft_ce(logits, probs)).epsilon(1e-14));
  // One-hot probabilities reduce to cross_entropy; smoothed one-hot to label smoothing.
  std::vector<int64_t> t{3, 0, 6, 1};
  std::vector<double> onehot(28, 0.0), smooth(28, 0.1 / 7);
  for (int64_t r = 0; r < 4; ++r) {
    onehot[r * 7 + t[r]] = 1.0;
    smooth[r * 7 + t[r]] += 0.9;
  }
  Tensor target = from_vector(t, {4});
  CHECK(soft_cross_entropy(logits, from_vector(onehot, {4, 7})).item() ==
        Approx(cross_entropy(logits, target).item()).epsilon(1e-14));
  CHECK(soft_cross_entropy(logits, from_vector(smooth, {4, 7})).item() ==
        Approx(cross_entropy(logits, target, 0.1).item()).epsilon(1e-14));
  // PyTorch 1.13: torch.sum(-p * F.log_softmax(l, -1), -1).mean() with l as above and
  //   p = torch.tensor([[.2, .5, .3], [.6, .1, .3]], dtype=torch.float64) -> 1.9401263439326872
  Tensor l = from_vector(std::vector<double>{1, 2, 0.5, -1, 0, 3}, {2, 3});
  Tensor p = from_vector(std::vector<double>{0.2, 0.5, 0.3, 0.6, 0.1, 0.3}, {2, 3});
  CHECK(soft_cross_entropy(l, p).item() == Approx(1.9401263439326872).epsilon(1e-14));
}

TEST_CASE("cross_entropy is stable for huge logits and agrees in float32", "[loss]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO(dtype_name(dt));
    // Row 0: target holds the max by 1 over 1e4-sized logits; row 1: target is 2e4 below the max.
    Tensor l = from_vector(std::vector<double>{1e4, 1e4 - 1, -1e4, 5e3, -1.5e4, 5e3}, {2, 3}).to(dt);
    Tensor t = from_vector(std::vector<int64_t>{0, 1}, {2});
    double expect = (std::log1p(std::exp(-1.0)) + (2e4 + std::log(2.0))) / 2;
    CHECK(cross_entropy(l, t).item() == Approx(expect).epsilon(1e-6));
  }
  Tensor logits = random({64, 1000}, 3.0, 4);
  Generator gen(5);
  Tensor t = argmax(rand({64, 1000}, DType::Float64, &gen), 1);
  CHECK(cross_entropy(logits.to(DType::Float32), t, 0.1).item() ==
        Approx(cross_entropy(logits, t, 0.1).item()).epsilon(1e-5));
}

TEST_CASE("loss errors name the bad value and its position", "[loss][errors]") {
  Tensor logits = zeros({3, 4});
  CHECK_THROWS_WITH(
      cross_entropy(logits, from_vector(std::vector<int64_t>{0, 4, 1}, {3})),
      Catch::Contains("cross_entropy") && Catch::Contains("target 4 at position 1") && Catch::Contains("4 classes"));
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector(std::vector<int64_t>{0, 1, -1}, {3})),
                    Catch::Contains("target -1 at position 2"));
  CHECK_THROWS_WITH(cross_entropy(logits, zeros({3})),
                    Catch::Contains("cross_entropy") && Catch::Contains("int64") && Catch::Contains("float32[3]"));
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector(std::vector<int64_t>{0, 1}, {2})),
                    Catch::Contains("cross_entropy") && Catch::Contains("[3]") && Catch::Contains("[2]"));
  CHECK_THROWS_WITH(cross_entropy(zeros({3}), from_vector(std::vector<int64_t>{0}, {1})),
                    Catch::Contains("cross_entropy") && Catch::Contains("[N, C]"));
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector(std::vector<int64_t>{0, 1, 2}, {3}), 1.5),
                    Catch::Contains("label_smoothing") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(soft_cross_entropy(logits, zeros({3, 5})),
                    Catch::Contains("soft_cross_entropy") && Catch::Contains("[3, 4]") && Catch::Contains("[3, 5]"));
  CHECK_THROWS_WITH(soft_cross_entropy(logits, zeros({3, 4}, DType::Float64)),
                    Catch::Contains("soft_cross_entropy") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(cross_entropy(zeros({0, 4}), from_vector(std::vector<int64_t>{}, {0})),
                    Catch::Contains("cross_entropy") && Catch::Contains("[0, 4]"));
}
