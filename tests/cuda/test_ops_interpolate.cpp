// interpolate (bilinear, bicubic) on device cuda against the CPU, forward and backward.
#include <catch2/catch.hpp>

#include "ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

TEST_CASE("interpolate up and down, bilinear and bicubic, on cuda", "[cuda][interpolate]") {
  const Tensor x = randu({2, 3, 7, 5});
  for (auto mode : {InterpolationMode::Bilinear, InterpolationMode::Bicubic}) {
    for (std::array<int64_t, 2> size : {std::array<int64_t, 2>{14, 10}, {11, 8}, {3, 2}, {7, 5}, {1, 1}}) {
      INFO((mode == InterpolationMode::Bilinear ? "bilinear " : "bicubic ") << size[0] << "x" << size[1]);
      check_on_devices("interpolate", {x}, [=](const Inputs& in) { return interpolate(in[0], size, mode); });
    }
  }
  check_on_devices("float64", {x.to(DType::Float64)},
                   [](const Inputs& in) { return interpolate(in[0], {9, 4}, InterpolationMode::Bicubic); });
  check_on_devices("a single input pixel", {randu({1, 2, 1, 1})},
                   [](const Inputs& in) { return interpolate(in[0], {3, 4}, InterpolationMode::Bicubic); });
}
