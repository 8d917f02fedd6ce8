// conv2d and conv1d on device cuda against the CPU: every convolution runs a convolution plan, so
// these tests check the translation to cuDNN's arguments end to end (on the emulator through the
// reference of cuDNN's contract), and the bias kernels of our own.
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

namespace {
void check_conv(const char* name, const Shape& x, const Shape& w, std::array<int64_t, 2> stride,
                std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, int64_t groups) {
  const Tensor xt = randu(x), wt = randu(w, -0.5, 0.5, 3), bt = randu({w[0]}, -0.5, 0.5, 4);
  check_on_devices(name, {xt, wt, bt}, [=](const Inputs& in) {
    return conv2d(in[0], in[1], in[2], stride, padding, dilation, groups);
  });
  check_on_devices(name, {xt, wt}, [=](const Inputs& in) {
    return conv2d(in[0], in[1], Tensor(), stride, padding, dilation, groups);
  });
}
}  // namespace

TEST_CASE("dense convolutions on cuda", "[cuda][conv]") {
  check_conv("3x3 padded", {2, 3, 7, 6}, {5, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1);
  check_conv("conv stem: 3x3 stride 2", {2, 3, 9, 9}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1);
  check_conv("patch embedding: 4x4 stride 4", {2, 3, 8, 8}, {6, 3, 4, 4}, {4, 4}, {0, 0}, {1, 1}, 1);
  check_conv("1x1", {2, 8, 4, 5}, {3, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1);
  check_conv("dilated, rectangular", {1, 2, 9, 8}, {3, 2, 3, 2}, {2, 1}, {2, 0}, {2, 3}, 1);
}

TEST_CASE("grouped and depthwise convolutions on cuda", "[cuda][conv]") {
  check_conv("grouped", {2, 6, 5, 5}, {9, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3);
  check_conv("depthwise 3x3", {2, 8, 6, 6}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 8);
  check_conv("depthwise 5x5 stride 2", {1, 4, 9, 9}, {4, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 4);
}

TEST_CASE("conv1d and float64 on cuda", "[cuda][conv]") {
  check_on_devices("conv1d", {randu({2, 4, 11}), randu({5, 4, 3}, -0.5, 0.5, 3), randu({5})},
                   [](const Inputs& in) { return conv1d(in[0], in[1], in[2], 2, 1); });
  check_on_devices("float64", {randu({1, 2, 5, 5}).to(DType::Float64), randu({3, 2, 3, 3}, -1, 1, 3).to(DType::Float64)},
                   [](const Inputs& in) { return conv2d(in[0], in[1], Tensor(), {1, 1}, {1, 1}); });
}
