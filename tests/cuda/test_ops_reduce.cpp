// Reductions on device cuda against the CPU (tests/device_check.h): the column path (leading dims
// of a contiguous tensor), the row path (everything else), long rows, and argmax.
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

TEST_CASE("sum and mean over every kind of dim set on cuda", "[cuda][reduce]") {
  const Tensor x = randu({3, 5, 7, 4});
  const std::vector<Shape> dim_sets = {{0}, {1}, {3}, {0, 1}, {1, 2}, {0, 3}, {0, 1, 2}, {}};
  for (const Shape& dims : dim_sets) {
    for (bool keepdim : {false, true}) {
      INFO("dims " << detail::concat(dims) << (keepdim ? " keepdim" : ""));
      check_on_devices("sum", {x}, [&](const Inputs& in) { return sum(in[0], dims, keepdim); });
      check_on_devices("mean", {x}, [&](const Inputs& in) { return mean(in[0], dims, keepdim); });
    }
  }
}

TEST_CASE("amax, var and norm on cuda", "[cuda][reduce]") {
  const Tensor x = randu({4, 6, 5});
  for (const Shape& dims : std::vector<Shape>{{0}, {2}, {1, 2}, {}}) {
    INFO("dims " << detail::concat(dims));
    check_on_devices("amax", {x}, [&](const Inputs& in) { return amax(in[0], dims, false); });
    check_on_devices("var", {x}, [&](const Inputs& in) { return var(in[0], dims, 1, true); });
    check_on_devices("norm", {x}, [&](const Inputs& in) { return norm(in[0], dims, false); });
  }
}

TEST_CASE("reductions of rows longer than a block and of odd sizes on cuda", "[cuda][reduce]") {
  const Tensor long_rows = randu({3, 3000});
  check_on_devices("sum of 3000-element rows", {long_rows}, [](const Inputs& in) { return sum(in[0], {1}); });
  check_on_devices("amax of 3000-element rows", {long_rows}, [](const Inputs& in) { return amax(in[0], {1}); });
  check_on_devices("column sums over 3000 rows", {long_rows.t().contiguous()},
                   [](const Inputs& in) { return sum(in[0], {0}); });
  const Tensor odd = randu({37, 33});
  check_on_devices("sum over 33", {odd}, [](const Inputs& in) { return sum(in[0], {1}); });
  check_on_devices("sum over 37", {odd}, [](const Inputs& in) { return sum(in[0], {0}); });
  check_on_devices("float64", {odd.to(DType::Float64)}, [](const Inputs& in) { return sum(in[0], {0, 1}); });
  check_on_devices("reduce an empty dim", {zeros({4, 0, 3})}, [](const Inputs& in) { return sum(in[0], {1}); },
                   {.backward = false});
}

TEST_CASE("sum_to, as the gradients of broadcasting use it, on cuda", "[cuda][reduce]") {
  const Tensor g = randu({4, 3, 5});
  for (const Shape& target : std::vector<Shape>{{5}, {3, 1}, {1, 3, 5}, {4, 1, 1}, {}}) {
    INFO("to " << detail::concat(target));
    check_on_devices("sum_to", {g}, [&](const Inputs& in) { return sum_to(in[0], target); });
  }
}

TEST_CASE("argmax on cuda finds the first maximum", "[cuda][reduce]") {
  // Ties on purpose: rounded values repeat, so the first index of the maximum matters.
  const Tensor x = (randu({6, 300}) * 4.0).to(DType::Int64).to(DType::Float32);
  for (int64_t dim : {0, 1})
    check_on_devices("argmax", {x}, [dim](const Inputs& in) { return argmax(in[0], dim, true); });
  check_on_devices("argmax int64", {x.to(DType::Int64)}, [](const Inputs& in) { return argmax(in[0], 1); });
  check_on_devices("argmax bool", {gt(x, scalar_like(1.0, x))}, [](const Inputs& in) { return argmax(in[0], 1); });
}
