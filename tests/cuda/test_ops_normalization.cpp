// layer_norm, batch_norm and normalize on device cuda against the CPU (tests/device_check.h).
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

TEST_CASE("layer_norm and its gradients on cuda", "[cuda][normalization]") {
  for (const Shape& shape : std::vector<Shape>{{5, 8}, {2, 3, 37}, {130, 24}, {2, 1300}}) {
    const int64_t C = shape.back();
    const Tensor x = randu(shape, -2, 2), w = randu({C}, 0.5, 1.5, 3), b = randu({C}, -0.5, 0.5, 4);
    INFO("shape " << detail::concat(shape));
    check_on_devices("layer_norm", {x, w, b}, [](const Inputs& in) { return layer_norm(in[0], in[1], in[2], 1e-6); });
    check_on_devices("layer_norm without affine", {x},
                     [](const Inputs& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-5); });
    check_on_devices("layer_norm weight only", {x, w},
                     [](const Inputs& in) { return layer_norm(in[0], in[1], Tensor(), 1e-5); });
  }
  // C = 1: every output is the bias. (Its input gradient is 0 analytically and rounding noise times
  // rstd = 1/sqrt(eps) numerically, which a fused multiply-add on one side changes: forward only.)
  check_on_devices("layer_norm over one channel", {randu({4, 1}), randu({1}), randu({1}, -1, 1, 5)},
                   [](const Inputs& in) { return layer_norm(in[0], in[1], in[2], 1e-6); }, {.backward = false});
  const Tensor x = randu({6, 10}).to(DType::Float64);
  check_on_devices("float64", {x, randu({10}).to(DType::Float64), randu({10}, 0, 1, 9).to(DType::Float64)},
                   [](const Inputs& in) { return layer_norm(in[0], in[1], in[2], 1e-6); });
}

TEST_CASE("batch_norm in training and eval on cuda, running statistics included", "[cuda][normalization]") {
  for (const Shape& shape : std::vector<Shape>{{6, 4}, {3, 5, 4, 6}, {2, 3, 17, 1}}) {
    const int64_t C = shape[1];
    const Tensor x = randu(shape, -2, 2), w = randu({C}, 0.5, 1.5, 3), b = randu({C}, -0.5, 0.5, 4);
    const Tensor rm = randu({C}, -0.1, 0.1, 5), rv = randu({C}, 0.5, 1.5, 6);
    INFO("shape " << detail::concat(shape));
    for (bool training : {true, false}) {
      // The updated running statistics are part of the result: concatenated after the output.
      check_on_devices(training ? "batch_norm train" : "batch_norm eval", {x, w, b, rm, rv},
                       [training](const Inputs& in) {
                         Tensor y = batch_norm(in[0], in[3], in[4], in[1], in[2], training, 0.1, 1e-5);
                         NoGradGuard no_grad;
                         return cat({y.reshape({-1}), in[3].detach().clone(), in[4].detach().clone()}, 0);
                       },
                       {.no_grad = {3, 4}});
    }
  }
}

TEST_CASE("normalize on cuda", "[cuda][normalization]") {
  const Tensor x = randu({4, 6, 5});
  for (int64_t dim : {-1, 1})
    check_on_devices("normalize", {x}, [dim](const Inputs& in) { return normalize(in[0], dim, 1e-12); });
}
