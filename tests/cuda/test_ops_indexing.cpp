// Indexing ops on device cuda against the CPU (tests/device_check.h): gather and index_select (with
// repeated indices, whose gradients add up), and the ops built on copy and fill.
#include <catch2/catch.hpp>

#include "ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

namespace {
// idx % n, elementwise (keeps repeated values repeated).
Tensor remainder_index(const Tensor& idx, int64_t n) {
  std::vector<int64_t> v = idx.to_vector<int64_t>();
  for (int64_t& x : v) x %= n;
  return from_vector(v, idx.shape());
}
}  // namespace

TEST_CASE("index_select with repeated indices and its gradient on cuda", "[cuda][indexing]") {
  const Tensor x = randu({5, 4, 3});
  const Tensor idx = from_vector(std::vector<int64_t>{4, 0, 4, 2, 4, 1}, {6});
  for (int64_t dim : {0, 1, 2}) {
    const Tensor i = dim == 0 ? idx : remainder_index(idx, x.size(dim));
    check_on_devices("index_select", {x, i}, [dim](const Inputs& in) { return index_select(in[0], dim, in[1]); });
  }
}

TEST_CASE("gather along every dim, strided indices, any dtype, on cuda", "[cuda][indexing]") {
  const Tensor x = randu({4, 5, 6});
  for (int64_t dim : {0, 1, 2}) {
    Shape ishape = {3, 4, 5};
    ishape[dim] = 7;  // longer than x along dim: indices repeat
    const Tensor idx = (randu(ishape, 0, 1, 31 + dim) * static_cast<double>(x.size(dim))).to(DType::Int64);
    check_on_devices("gather", {x, idx}, [dim](const Inputs& in) { return gather(in[0], dim, in[1]); });
    check_on_devices("gather int64", {(x * 100.0).to(DType::Int64), idx},
                     [dim](const Inputs& in) { return gather(in[0], dim, in[1]); });
  }
  check_on_devices("gather bool", {gt(x, scalar_like(0.0, x)), zeros({4, 5, 2}, DType::Int64)},
                   [](const Inputs& in) { return gather(in[0], 2, in[1]); });
}

TEST_CASE("cat, stack, split, pad and narrow on cuda", "[cuda][indexing]") {
  const Tensor a = randu({3, 4}), b = randu({3, 2}, -1, 1, 5);
  check_on_devices("cat", {a, b}, [](const Inputs& in) { return cat({in[0], in[1], in[0]}, 1); });
  check_on_devices("stack", {a, a * 2.0}, [](const Inputs& in) { return stack({in[0], in[1]}, 1); });
  check_on_devices("split", {a}, [](const Inputs& in) { return split(in[0], 3, 1)[1] * 2.0; });
  check_on_devices("pad", {a}, [](const Inputs& in) { return pad(in[0], {1, 2, 0, 1}, 0.5); });
  check_on_devices("crop", {a}, [](const Inputs& in) { return pad(in[0], {-1, 0, 0, -1}); });
  check_on_devices("narrow and select", {randu({4, 5, 6})},
                   [](const Inputs& in) { return in[0].narrow(1, 1, 3).select(2, 4) * 3.0; });
}
