// Indexing ops on device cuda against the CPU (tests/device_check.h): gather and index_select
// (the gather and scatter-add kernels) with repeated, strided and broadcast indices along every
// dim, int64/bool values and gradients; indices out of range are skipped by the kernels and
// reported at the next synchronisation; cat/stack/split/pad/narrow, which run on the copy and
// fill kernels.
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

namespace {

// int64 values in [0, n), reproducible by seed; repeats are certain when the tensor has more
// than n elements.
Tensor random_index(const Shape& shape, int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> v(numel_of(shape));
  for (int64_t& i : v) i = static_cast<int64_t>(gen.uniform() * static_cast<double>(n));
  return from_vector(v, shape);
}

Tensor ints(const std::vector<int64_t>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

}  // namespace

TEST_CASE("gather along every dim with repeated indices and its gradient on cuda", "[cuda][indexing]") {
  const Tensor x = randu({4, 5, 6});
  // The index is larger than x along the gathered dim (repeats) and smaller in another dim, so
  // the scatter-add also leaves part of the gradient untouched.
  check_on_devices("gather dim 0", {x, random_index({7, 3, 6}, 4, 1)},
                   [](const Inputs& in) { return gather(in[0], 0, in[1]); });
  check_on_devices("gather dim 1", {x, random_index({4, 9, 2}, 5, 2)},
                   [](const Inputs& in) { return gather(in[0], 1, in[1]); });
  check_on_devices("gather dim -1", {x, random_index({2, 5, 11}, 6, 3)},
                   [](const Inputs& in) { return gather(in[0], -1, in[1]); });
  check_on_devices("gather float64", {x.to(DType::Float64), random_index({4, 5, 3}, 5, 4)},
                   [](const Inputs& in) { return gather(in[0], 1, in[1]); });
}

TEST_CASE("gather with transposed, broadcast and strided operands on cuda", "[cuda][indexing]") {
  const Tensor x = randu({6, 5});
  // x transposed, the index transposed: neither walks its memory in order.
  check_on_devices("transposed", {x, random_index({3, 8}, 5, 5)},
                   [](const Inputs& in) { return gather(in[0].t(), 0, in[1].t()); });
  // An index broadcast along dim 0 (stride 0): every row gathers the same columns, and the
  // gradient adds all rows' contributions.
  check_on_devices("stride-0 index", {x, random_index({1, 7}, 5, 6)},
                   [](const Inputs& in) { return gather(in[0], 1, in[1].expand({6, 7})); });
  // Rows longer than a block and a dim that is not a multiple of 32 (grid-stride loops).
  check_on_devices("long rows", {randu({3, 301}), random_index({3, 517}, 301, 8)},
                   [](const Inputs& in) { return gather(in[0], 1, in[1]); });
}

TEST_CASE("gather from an input broadcast along the gathered dim on cuda", "[cuda][indexing]") {
  // Every index reads the same element; the gradient of the expand is a sum (reduce kernel).
  check_on_devices("stride-0 input", {randu({6, 1}), random_index({6, 4}, 3, 7)},
                   [](const Inputs& in) { return gather(in[0].expand({6, 3}), 1, in[1]); });
}

TEST_CASE("gather of int64 and bool values on cuda", "[cuda][indexing]") {
  const Tensor x = randu({5, 7});
  const Tensor index = random_index({5, 9}, 7, 9);
  check_on_devices("int64", {(x * 1000.0).to(DType::Int64), index},
                   [](const Inputs& in) { return gather(in[0], 1, in[1]); });
  check_on_devices("bool", {gt(x, scalar_like(0.0, x)), index},
                   [](const Inputs& in) { return gather(in[0], 1, in[1]); });
  check_on_devices("int64 index_select", {(x * 1000.0).to(DType::Int64), ints({4, 0, 4, 2})},
                   [](const Inputs& in) { return index_select(in[0], 0, in[1]); });
}

TEST_CASE("index_select with repeated indices along every dim and its gradient on cuda", "[cuda][indexing]") {
  const Tensor x = randu({3, 4, 5});
  const Tensor rep = ints({2, 0, 2, 2, 1});
  check_on_devices("dim 0", {x, rep}, [](const Inputs& in) { return index_select(in[0], 0, in[1]); });
  check_on_devices("dim 1", {x, ints({3, 3, 0})}, [](const Inputs& in) { return index_select(in[0], 1, in[1]); });
  check_on_devices("dim 2", {x, ints({4, 1, 4, 0, 1, 4})},
                   [](const Inputs& in) { return index_select(in[0], 2, in[1]); });
  check_on_devices("permuted input", {x, rep},
                   [](const Inputs& in) { return index_select(in[0].permute({2, 0, 1}), 1, in[1]); });
  // An embedding-like lookup: many repeated rows longer than a block.
  check_on_devices("embedding", {randu({11, 300}), random_index({40}, 11, 10)},
                   [](const Inputs& in) { return index_select(in[0], 0, in[1]); });
  check_on_devices("float64", {x.to(DType::Float64), rep}, [](const Inputs& in) { return index_select(in[0], 0, in[1]); });
  check_on_devices("empty index", {x, from_vector(std::vector<int64_t>{}, {0})},
                   [](const Inputs& in) { return index_select(in[0], 1, in[1]); });
}

TEST_CASE("indices out of range are skipped by the kernels and reported at synchronisation", "[cuda][indexing]") {
  const Device dev = Device::cuda();
  const Tensor x_host = from_vector(std::vector<double>{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3});
  Tensor x = x_host.to(dev).set_requires_grad(true);
  Tensor y = index_select(x, 0, ints({1, 9, 3, -2}).to(dev));
  y.backward(ones({4, 3}, DType::Float64, dev));
  CHECK_THROWS_WITH(synchronize(dev), Catch::Contains("index_select: index") && Catch::Contains("out of range"));
  // The valid rows were gathered, and only they received gradient.
  const std::vector<double> got = y.to(Device::cpu()).to_vector<double>();
  CHECK(std::vector<double>(got.begin(), got.begin() + 3) == std::vector<double>{10, 11, 12});
  CHECK(std::vector<double>(got.begin() + 6, got.begin() + 9) == std::vector<double>{30, 31, 32});
  CHECK(x.grad().to(Device::cpu()).to_vector<double>() == std::vector<double>{0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1});

  Tensor g = gather(x.detach(), 1, from_vector(std::vector<int64_t>{2, 5, 0, -1, 1, 1, 0, 3}, {4, 2}).to(dev));
  CHECK_THROWS_WITH(synchronize(dev), Catch::Contains("gather: index") && Catch::Contains("out of range"));
  const std::vector<double> gv = g.to(Device::cpu()).to_vector<double>();
  CHECK(gv[0] == 2);
  CHECK(gv[2] == 10);
  CHECK(gv[4] == 21);
  CHECK(gv[5] == 21);
  CHECK(gv[6] == 30);
}

TEST_CASE("cat, stack, split, narrow and pad on cuda", "[cuda][indexing]") {
  const Tensor a = randu({3, 4}), b = randu({3, 2}, -1, 1, 8), c = randu({3, 4}, -1, 1, 9);
  check_on_devices("cat dim 1", {a, b, c}, [](const Inputs& in) { return cat({in[0], in[1], in[2]}, 1); });
  check_on_devices("cat dim 0", {a, c}, [](const Inputs& in) { return cat({in[0], in[1].t().t()}, 0); });
  check_on_devices("cat transposed", {a, c}, [](const Inputs& in) { return cat({in[0].t(), in[1].t()}, 1); });
  check_on_devices("cat int64", {(a * 10.0).to(DType::Int64), (c * 10.0).to(DType::Int64)},
                   [](const Inputs& in) { return cat({in[0], in[1]}, 0); });
  check_on_devices("stack", {a, c}, [](const Inputs& in) { return stack({in[0], in[1]}, 1); });
  check_on_devices("split", {a}, [](const Inputs& in) {
    std::vector<Tensor> pieces = split(in[0], 3, 1);
    return pieces[0] * 2.0 + pad(pieces[1], {0, 2});
  });
  check_on_devices("chunk", {randu({5, 6})}, [](const Inputs& in) {
    std::vector<Tensor> pieces = chunk(in[0], 3, 0);
    return cat({pieces[2], pieces[0]}, 0);
  });
  check_on_devices("narrow", {randu({6, 7})}, [](const Inputs& in) { return in[0].narrow(1, 2, 4).narrow(0, 1, 3) * 3.0; });
  check_on_devices("pad", {randu({2, 3, 4})}, [](const Inputs& in) { return pad(in[0], {1, 2, 0, 3}, -0.5); });
  check_on_devices("pad crops", {randu({2, 3, 5})}, [](const Inputs& in) { return pad(in[0], {-1, 2, 1, -2}); });
  check_on_devices("pad float64", {randu({3, 4}).to(DType::Float64)},
                   [](const Inputs& in) { return pad(in[0], {2, 0, 1, 1}, 1.5); });
  check_on_devices("cat with an empty piece", {a, randu({0, 4})}, [](const Inputs& in) { return cat({in[0], in[1]}, 0); });
}
