// Cross-entropy on device cuda against the CPU (tests/device_check.h).
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

TEST_CASE("cross_entropy with hard targets and label smoothing on cuda", "[cuda][loss]") {
  for (int64_t C : {1, 10, 1000}) {
    const Tensor logits = randu({6, C}, -3, 3);
    std::vector<int64_t> t(6);
    for (int64_t i = 0; i < 6; ++i) t[i] = (i * 7) % C;
    const Tensor target = from_vector(t, {6});
    INFO(C << " classes");
    for (double smoothing : {0.0, 0.1})
      check_on_devices("cross_entropy", {logits, target},
                       [smoothing](const Inputs& in) { return cross_entropy(in[0], in[1], smoothing); });
  }
  check_on_devices("float64", {randu({3, 5}).to(DType::Float64), from_vector(std::vector<int64_t>{4, 0, 2}, {3})},
                   [](const Inputs& in) { return cross_entropy(in[0], in[1], 0.2); });
}

TEST_CASE("soft_cross_entropy and its target gradient on cuda", "[cuda][loss]") {
  const Tensor logits = randu({5, 12}, -3, 3);
  const Tensor probs = softmax(randu({5, 12}, -1, 1, 17), -1);
  check_on_devices("soft_cross_entropy", {logits, probs},
                   [](const Inputs& in) { return soft_cross_entropy(in[0], in[1]); });
}
