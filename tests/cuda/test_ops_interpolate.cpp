// interpolate on device cuda against the CPU (tests/device_check.h): bilinear and bicubic, up- and
// down-sampling by integer and non-integer factors, a size-1 axis, planes larger than a block,
// float32 and float64, forward and gradient (the backward kernel gathers per input pixel).
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

namespace {

constexpr InterpolationMode kModes[] = {InterpolationMode::Bilinear, InterpolationMode::Bicubic};

const char* mode_name(InterpolationMode m) { return m == InterpolationMode::Bilinear ? "bilinear" : "bicubic"; }

void check_resize(const std::string& name, const Tensor& x, std::array<int64_t, 2> size) {
  for (InterpolationMode mode : kModes)
    check_on_devices(name + " " + mode_name(mode), {x},
                     [size, mode](const Inputs& in) { return interpolate(in[0], size, mode); });
}

}  // namespace

TEST_CASE("interpolate up and down by integer factors on cuda", "[cuda][interpolate]") {
  const Tensor x = randu({2, 3, 6, 8});
  check_resize("2x up", x, {12, 16});
  check_resize("2x down", x, {3, 4});
  check_resize("same size", x, {6, 8});
}

TEST_CASE("interpolate by non-integer factors, mixed per axis, on cuda", "[cuda][interpolate]") {
  const Tensor x = randu({1, 2, 7, 5});
  check_resize("up 7x5 -> 11x13", x, {11, 13});
  check_resize("down 7x5 -> 3x2", x, {3, 2});
  check_resize("mixed 7x5 -> 4x9", x, {4, 9});
  check_resize("far down 7x5 -> 1x1", x, {1, 1});
  // A single input row/column: every tap clamps onto it.
  check_resize("size-1 axis", randu({2, 1, 1, 5}), {3, 7});
}

TEST_CASE("interpolate of planes larger than a block, and float64, on cuda", "[cuda][interpolate]") {
  check_resize("large planes", randu({1, 2, 19, 23}), {37, 29});
  const Tensor x64 = randu({2, 2, 5, 6}).to(DType::Float64);
  testing::DeviceCheckOptions tight;
  tight.rtol = 1e-12;
  tight.atol = 1e-12;
  for (InterpolationMode mode : kModes)
    for (std::array<int64_t, 2> size : {std::array<int64_t, 2>{9, 13}, std::array<int64_t, 2>{3, 4}})
      check_on_devices(std::string("float64 ") + mode_name(mode), {x64},
                       [size, mode](const Inputs& in) { return interpolate(in[0], size, mode); }, tight);
}

TEST_CASE("interpolate of an empty batch on cuda", "[cuda][interpolate]") {
  check_resize("empty batch", randu({0, 3, 4, 4}), {5, 6});
}
