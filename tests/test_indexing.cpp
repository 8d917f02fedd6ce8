// Indexing ops (cat, stack, split, split_with_sizes, chunk, index_select, gather, pad): values
// against naive multi-index loops, float64 gradient checks of index_select (repeated indices) and
// pad (negative pads), and error messages. The gradient checks of cat, split, chunk and gather are
// samples of the op table, tests/op_samples/indexing.cpp.
#include <functional>
#include <map>
#include <string>

#include "gradcheck.h"
#include "tests/device_check.h"
#include "tests/kernel_calls.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Calls f(idx) for every multi-index of `shape`, in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  if (numel_of(shape) == 0) return;
  Shape idx(shape.size(), 0);
  for (;;) {
    f(idx);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Row-major position of multi-index idx in shape.
int64_t flat(const Shape& shape, const Shape& idx) {
  int64_t pos = 0;
  for (size_t d = 0; d < shape.size(); ++d) pos = pos * shape[d] + idx[d];
  return pos;
}

double at(const Tensor& t, const Shape& idx) { return t.to_vector<double>()[flat(t.shape(), idx)]; }

Tensor random(const Shape& shape, uint64_t seed) { return leaf(shape, -1, 1, seed).detach(); }

// Random int64 tensor with values in [0, n).
Tensor random_index(const Shape& shape, int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> v(numel_of(shape));
  for (int64_t& i : v) i = static_cast<int64_t>(gen.uniform() * n);
  return from_vector(v, shape);
}

Tensor naive_cat(const std::vector<Tensor>& ts, int64_t d) {
  Shape shape = ts[0].shape();
  shape[d] = 0;
  for (const Tensor& t : ts) shape[d] += t.shape()[d];
  std::vector<double> out(numel_of(shape));
  for_each_index(shape, [&](const Shape& idx) {
    Shape src = idx;
    size_t k = 0;
    while (src[d] >= ts[k].shape()[d]) src[d] -= ts[k++].shape()[d];
    out[flat(shape, idx)] = at(ts[k], src);
  });
  return from_vector(out, shape);
}

std::vector<int64_t> piece_sizes(const std::vector<Tensor>& pieces, int64_t d) {
  std::vector<int64_t> s;
  for (const Tensor& p : pieces) s.push_back(p.shape()[d]);
  return s;
}

}  // namespace

TEST_CASE("cat joins along any dim", "[indexing]") {
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    INFO("dim " << dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    std::vector<Tensor> ts;
    for (int64_t k : {1, 3, 0, 2}) {  // includes an empty piece
      Shape s{2, 3, 4};
      s[d] = k;
      ts.push_back(random(s, uint64_t(k + 10 * d)));
    }
    Tensor out = cat(ts, dim);
    CHECK(max_abs_diff(out, naive_cat(ts, d)) == 0.0);
  }
  Tensor a = from_vector(std::vector<int64_t>{1, 2}, {1, 2}), b = from_vector(std::vector<int64_t>{3, 4, 5, 6}, {2, 2});
  Tensor c = cat({a, b}, 0);
  CHECK(c.dtype() == DType::Int64);
  CHECK(c.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  // non-contiguous inputs are copied through their strides
  Tensor t = random({4, 3}, 5);
  CHECK(max_abs_diff(cat({t.t(), t.t()}, 1), naive_cat({t.t().contiguous(), t.t().contiguous()}, 1)) == 0.0);
}

TEST_CASE("stack inserts a new dim", "[indexing]") {
  std::vector<Tensor> ts = {random({2, 3}, 1), random({2, 3}, 2), random({2, 3}, 3)};
  for (int64_t dim : {0, 1, 2, -1}) {
    INFO("dim " << dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Tensor out = stack(ts, dim);
    Shape expected{2, 3};
    expected.insert(expected.begin() + d, 3);
    REQUIRE(out.shape() == expected);
    for_each_index(out.shape(), [&](const Shape& idx) {
      Shape src = idx;
      src.erase(src.begin() + d);
      CHECK(at(out, idx) == at(ts[idx[d]], src));
    });
  }
}

TEST_CASE("split, split_with_sizes and chunk are views with torch's sizes", "[indexing]") {
  Tensor x = random({5, 6}, 1);
  std::vector<Tensor> s = split(x, 2, 0);
  CHECK(piece_sizes(s, 0) == std::vector<int64_t>{2, 2, 1});
  for (size_t i = 0; i < s.size(); ++i) {
    CHECK(s[i].impl().storage == x.impl().storage);  // views, no copy
    CHECK(max_abs_diff(s[i], x.narrow(0, 2 * int64_t(i), s[i].shape()[0])) == 0.0);
  }
  CHECK(piece_sizes(split(x, 6, -1), 1) == std::vector<int64_t>{6});
  CHECK(piece_sizes(split(x, 4, 1), 1) == std::vector<int64_t>{4, 2});
  CHECK(piece_sizes(split_with_sizes(x, {1, 0, 5}, 1), 1) == std::vector<int64_t>{1, 0, 5});
  CHECK(max_abs_diff(split_with_sizes(x, {1, 0, 5}, 1)[2], x.narrow(1, 1, 5)) == 0.0);
  // torch.chunk: ceil(n / chunks) per piece, so possibly fewer pieces than asked for
  CHECK(piece_sizes(chunk(x, 3, 0), 0) == std::vector<int64_t>{2, 2, 1});
  CHECK(piece_sizes(chunk(x, 4, 1), 1) == std::vector<int64_t>{2, 2, 2});
  CHECK(piece_sizes(chunk(x, 5, 1), 1) == std::vector<int64_t>{2, 2, 2});
  CHECK(piece_sizes(chunk(x, 8, 0), 0) == std::vector<int64_t>{1, 1, 1, 1, 1});
  CHECK(piece_sizes(chunk(x, 1, 0), 0) == std::vector<int64_t>{5});
  Tensor empty = zeros({0, 2});
  CHECK(piece_sizes(chunk(empty, 3, 0), 0) == std::vector<int64_t>{0, 0, 0});
  CHECK(piece_sizes(split(empty, 2, 0), 0) == std::vector<int64_t>{0});
}

TEST_CASE("index_select picks rows with repeats", "[indexing]") {
  Tensor x = random({3, 4, 5}, 1);
  Tensor index = from_vector(std::vector<int64_t>{2, 0, 2, 1, 2}, {5});
  for (int64_t dim : {0, 1, 2, -1}) {
    INFO("dim " << dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Tensor idx = index;  // values below every dim's size
    Tensor out = index_select(x, dim, idx);
    Shape expected = x.shape();
    expected[d] = idx.numel();
    REQUIRE(out.shape() == expected);
    std::vector<int64_t> iv = idx.to_vector<int64_t>();
    for_each_index(out.shape(), [&](const Shape& p) {
      Shape src = p;
      src[d] = iv[p[d]];
      CHECK(at(out, p) == at(x, src));
    });
  }
  CHECK(index_select(x, 1, zeros({0}, DType::Int64)).shape() == Shape{3, 0, 5});
  CHECK(index_select(x, 0, from_vector(std::vector<int64_t>{1}, {})).shape() == Shape{1, 4, 5});  // 0-d index
  Tensor xi = from_vector(std::vector<int64_t>{10, 11, 12, 13}, {2, 2});
  CHECK(index_select(xi, 1, from_vector(std::vector<int64_t>{1, 1, 0}, {3})).to_vector<int64_t>() ==
        std::vector<int64_t>{11, 11, 10, 13, 13, 12});
}

TEST_CASE("index_select passes gradcheck with repeated indices", "[indexing]") {
  Tensor x = leaf({3, 4});
  Tensor index = from_vector(std::vector<int64_t>{2, 0, 2, 2, 1}, {5});
  // Its float64 gradient checks are samples (tests/op_samples/indexing.cpp). Larger,, to run the scatter-add over several threads: every x element is hit by many repeats
  Tensor big = leaf({70, 64});
  Tensor many = random_index({300}, 64, 9);
  index_select(big, 1, many).sum().backward();
  std::vector<double> expected(70 * 64, 0.0);
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j : many.to_vector<int64_t>()) expected[i * 64 + j] += 1.0;
  CHECK(max_abs_diff(big.grad(), from_vector(expected, {70, 64})) == 0.0);
}

TEST_CASE("gather follows torch.gather", "[indexing]") {
  Tensor x = random({3, 4, 5}, 2);
  for (int64_t dim : {0, 1, 2, -2}) {
    INFO("dim " << dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape ishape{2, 3, 4};  // smaller than x in the other dims
    ishape[d] = 7;          // and longer along dim: repeats are certain
    Tensor index = random_index(ishape, x.shape()[d], uint64_t(d + 1));
    Tensor out = gather(x, dim, index);
    REQUIRE(out.shape() == ishape);
    for_each_index(ishape, [&](const Shape& p) {
      Shape src = p;
      src[d] = at(index, p);
      CHECK(at(out, p) == at(x, src));
    });
    // non-contiguous input and index
    Tensor xt = x.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
    Tensor it = index.permute({1, 0, 2}).contiguous().permute({1, 0, 2});
    CHECK(max_abs_diff(gather(xt, dim, it), out) == 0.0);
  }
}

TEST_CASE("pad fills, crops with negative pads, and passes gradcheck", "[indexing]") {
  Tensor x = random({2, 3, 4}, 3);
  const std::vector<Shape> cases = {{1, 2},   {1, 2, 0, 3}, {-1, 2}, {2, -3, -1, 1}, {1, 1, 1, 1, 1, 1},
                                    {-2, -2}, {0, 0},       {-3, 5}, {0, 0, 2, -3}};
  for (const Shape& pads : cases) {
    INFO("pads " << shape_str(pads));
    Tensor out = pad(x, pads, 2.5);
    Shape expected = x.shape();
    for (size_t k = 0; k < pads.size() / 2; ++k) expected[2 - k] += pads[2 * k] + pads[2 * k + 1];
    REQUIRE(out.shape() == expected);
    for_each_index(out.shape(), [&](const Shape& p) {
      Shape src = p;
      bool inside = true;
      for (size_t k = 0; k < pads.size() / 2; ++k) {
        src[2 - k] -= pads[2 * k];
        inside = inside && src[2 - k] >= 0 && src[2 - k] < x.shape()[2 - k];
      }
      CHECK(at(out, p) == (inside ? at(x, src) : 2.5));
    });
  }
  Tensor xi = from_vector(std::vector<int64_t>{1, 2}, {2});
  CHECK(pad(xi, {1, -1}, 7).to_vector<int64_t>() == std::vector<int64_t>{7, 1});
}

TEST_CASE("indexing errors name the op, the shapes and the index", "[indexing][errors]") {
  Tensor a = zeros({2, 3}), b = zeros({2, 4});
  CHECK_THROWS_WITH(cat({a, b}, 0), Catch::Contains("cat") && Catch::Contains("[2, 3]") && Catch::Contains("[2, 4]"));
  CHECK_THROWS_WITH(cat({a, zeros({2, 3, 1})}, 1), Catch::Contains("cat") && Catch::Contains("[2, 3, 1]"));
  CHECK_THROWS_WITH(cat({a, zeros({2, 3}, DType::Float64)}, 0), Catch::Contains("cat") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(cat({}, 0), Catch::Contains("cat") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(cat({a, a}, 2), Catch::Contains("cat"));
  CHECK_THROWS_WITH(cat({scalar_tensor(1.0)}, 0), Catch::Contains("cat") && Catch::Contains("zero-dim"));
  CHECK_THROWS_WITH(stack({a, b}, 0),
                    Catch::Contains("stack") && Catch::Contains("[2, 3]") && Catch::Contains("[2, 4]"));
  CHECK_THROWS_WITH(split_with_sizes(a, {1, 1}, 1),
                    Catch::Contains("split_with_sizes") && Catch::Contains("[1, 1]") && Catch::Contains("size 3"));
  CHECK_THROWS_WITH(split(a, 0, 1), Catch::Contains("split") && Catch::Contains("positive"));
  CHECK_THROWS_WITH(chunk(a, 0, 1), Catch::Contains("chunk") && Catch::Contains("positive"));

  Tensor bad = from_vector(std::vector<int64_t>{0, 5, 1}, {3});
  CHECK_THROWS_WITH(index_select(a, 1, bad), Catch::Contains("index_select") && Catch::Contains("index 5") &&
                                                 Catch::Contains("dim 1") && Catch::Contains("size 3"));
  CHECK_THROWS_WITH(index_select(a, 0, from_vector(std::vector<int64_t>{-1}, {1})),
                    Catch::Contains("index_select") && Catch::Contains("index -1") && Catch::Contains("size 2"));
  CHECK_THROWS_WITH(index_select(a, 0, zeros({1})), Catch::Contains("index_select") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(index_select(a, 0, zeros({1, 1}, DType::Int64)),
                    Catch::Contains("index_select") && Catch::Contains("1-D") && Catch::Contains("[1, 1]"));
  CHECK_THROWS_WITH(
      gather(a, 1, from_vector(std::vector<int64_t>{0, 3}, {1, 2})),
      Catch::Contains("gather") && Catch::Contains("index 3") && Catch::Contains("dim 1") && Catch::Contains("size 3"));
  CHECK_THROWS_WITH(gather(a, 1, zeros({2}, DType::Int64)),
                    Catch::Contains("gather") && Catch::Contains("[2]") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(gather(a, 1, zeros({3, 1}, DType::Int64)),
                    Catch::Contains("gather") && Catch::Contains("[3, 1]") && Catch::Contains("[2, 3]"));

  CHECK_THROWS_WITH(pad(a, {1, 2, 3}), Catch::Contains("pad") && Catch::Contains("even"));
  CHECK_THROWS_WITH(pad(a, {1, 1, 1, 1, 1, 1}), Catch::Contains("pad") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(pad(a, {-2, -2}), Catch::Contains("pad") && Catch::Contains("negative") && Catch::Contains("-1"));

  CHECK_THROWS_WITH(embed(a, {3, 5}, {1, 1}, {1, 2}),
                    Catch::Contains("embed") && Catch::Contains("does not fit in [3, 5]") && Catch::Contains("dim 1"));
  CHECK_THROWS_WITH(embed(a, {3, 5}, {0, 0}, {1, 0}), Catch::Contains("embed") && Catch::Contains("step [1, 0]"));
  CHECK_THROWS_WITH(embed(a, {6}, {0}, {1}), Catch::Contains("embed") && Catch::Contains("rank of the shape [6]"));
}

TEST_CASE("cast_all converts each tensor as to() does, one kernel call per pair of dtypes", "[indexing]") {
  const Tensor a = randu({3, 4}), b = randu({5}, -2, 2, 2), c = randu({2, 2}, -1, 1, 3).to(DType::Float64);
  const Tensor strided = randu({4, 3}, -1, 1, 4).t(), same = randu({2}).to(DType::BFloat16);
  std::vector<Tensor> out;
  {
    KernelCalls count;
    out = cast_all({a, b, c, strided, same}, DType::BFloat16);
    // float32 -> bfloat16 (a, b) and float64 -> bfloat16 (c): two calls; the transposed view goes
    // through the copy kernel; a tensor already in bfloat16 is returned as it is.
    CHECK(count.calls["cast_all"] == 2);
    CHECK(count.calls["copy"] == 1);
  }
  CHECK(out[4].impl_ptr() == same.impl_ptr());
  const std::vector<Tensor> in{a, b, c, strided};
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("tensor " << i);
    CHECK(out[i].dtype() == DType::BFloat16);
    CHECK(out[i].is_contiguous());
    CHECK(out[i].to(DType::Float32).to_vector<float>() ==
          in[i].to(DType::BFloat16).to(DType::Float32).to_vector<float>());
  }
  CHECK(cast_all({}, DType::Float32).empty());
  CHECK_THROWS_WITH(cast_all({a, Tensor()}, DType::Float64),
                    Catch::Contains("cast_all") && Catch::Contains("tensor 1"));
  // Integers convert too; only a floating result takes part in autograd.
  const Tensor ints = from_vector(std::vector<int64_t>{1, -2}, {2});
  CHECK(cast_all({ints}, DType::Float32)[0].to_vector<float>() == std::vector<float>{1, -2});
  Tensor leaf = randu({2}).set_requires_grad();
  CHECK(!cast_all({leaf}, DType::Int64)[0].requires_grad());
}
