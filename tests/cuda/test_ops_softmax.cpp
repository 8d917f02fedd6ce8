// softmax / log_softmax on device cuda against the CPU (tests/device_check.h): rows (the softmax
// dim last) and columns (a middle dim), rows longer than a block, float64, gradients.
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

TEST_CASE("softmax and log_softmax over the last dim on cuda", "[cuda][softmax]") {
  for (const Shape& shape : std::vector<Shape>{{4, 7}, {2, 3, 33}, {3, 1}, {2, 1500}}) {
    const Tensor x = randu(shape, -4.0, 4.0);
    INFO("shape " << detail::concat(shape));
    check_on_devices("softmax", {x}, [](const Inputs& in) { return softmax(in[0], -1); });
    check_on_devices("log_softmax", {x}, [](const Inputs& in) { return log_softmax(in[0], -1); });
  }
}

TEST_CASE("softmax and log_softmax over a middle dim on cuda", "[cuda][softmax]") {
  const Tensor x = randu({2, 3, 9, 5}, -4.0, 4.0);  // CoaT's k.softmax(dim=2): [B, heads, N, d]
  for (int64_t dim : {0, 1, 2}) {
    check_on_devices("softmax", {x}, [dim](const Inputs& in) { return softmax(in[0], dim); });
    check_on_devices("log_softmax", {x}, [dim](const Inputs& in) { return log_softmax(in[0], dim); });
  }
  check_on_devices("float64", {x.to(DType::Float64)}, [](const Inputs& in) { return softmax(in[0], 2); });
  check_on_devices("large logits stay finite", {x * 200.0}, [](const Inputs& in) { return log_softmax(in[0], -1); });
}
