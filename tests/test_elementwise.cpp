// Elementwise ops: values against closed forms, float64 gradient checks of the unary ops and of
// expanded and reused inputs, and error messages. The binary ops' gradient checks (broadcast both
// ways, a 0-d operand, views) are samples of the op table, tests/op_samples/elementwise.cpp. And the
// strided walk's dim order (ops/kernels/strided.h).
#include <cmath>

#include "gradcheck.h"
#include "tessera/core/levers.h"
#include "tessera/ops/kernels/strided.h"

using namespace tessera;
using namespace tessera::testing;

namespace {
using UnaryFn = Tensor (*)(const Tensor&);
struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;  // input range avoiding singularities and kinks
};

std::vector<UnaryCase> unary_cases() {
  const double pi = 3.14159265358979323846;
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double v) { return -v; }, -2, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }, -2, 2},
      {"log", [](const Tensor& x) { return log(x); }, [](double v) { return std::log(v); }, 0.5, 3},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, 0.5, 3},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 0.5, 3},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::abs(v); }, 0.2, 2},
      {"abs_neg", [](const Tensor& x) { return abs(x); }, [](double v) { return std::abs(v); }, -2, -0.2},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, -2, 2},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double v) { return std::erf(v); }, -2, 2},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double v) { return std::sin(v); }, -3, 3},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double v) { return std::cos(v); }, -3, 3},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); }, -4, 4},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double v) { return v / (1 + std::exp(-v)); }, -4, 4},
      {"relu_pos", [](const Tensor& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0; }, 0.1, 2},
      {"relu_neg", [](const Tensor& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0; }, -2, -0.1},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -3, 3},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); },
       [pi](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v))); }, -3, 3},
      {"pow_2.5", [](const Tensor& x) { return pow(x, 2.5); }, [](double v) { return std::pow(v, 2.5); }, 0.5, 2},
      {"pow_2", [](const Tensor& x) { return pow(x, 2.0); }, [](double v) { return v * v; }, -2, 2},
      {"pow_-1", [](const Tensor& x) { return pow(x, -1.0); }, [](double v) { return 1 / v; }, 0.5, 2},
      {"clamp_inside", [](const Tensor& x) { return clamp(x, -5, 5); }, [](double v) { return v; }, -2, 2},
      {"clamp_outside", [](const Tensor& x) { return clamp(x, -0.5, 0.5); },
       [](double v) { return std::min(0.5, std::max(-0.5, v)); }, 0.7, 2},
  };
}
}  // namespace

// Their float64 gradient checks, contiguous and through a transposed view, are samples
// (tests/op_samples/elementwise.cpp).
TEST_CASE("unary ops match their closed forms", "[elementwise]") {
  for (const UnaryCase& c : unary_cases()) {
    SECTION(c.name) {
      Tensor x = leaf({3, 4}, c.lo, c.hi);
      Tensor y = c.op(x);
      std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
      for (size_t i = 0; i < xv.size(); ++i) CHECK(yv[i] == Approx(c.ref(xv[i])).epsilon(1e-12).margin(1e-12));
    }
  }
}

TEST_CASE("float32 unary kernels agree with float64", "[elementwise]") {
  for (const UnaryCase& c : unary_cases()) {
    SECTION(c.name) {
      Tensor x = leaf({1000}, c.lo, c.hi).detach();
      Tensor y64 = c.op(x), y32 = c.op(x.to(DType::Float32));
      CHECK(max_abs_diff(y64, y32.to(DType::Float64)) < 2e-5 * (1 + std::abs(c.hi)));
    }
  }
}

TEST_CASE("binary values follow NumPy broadcasting", "[elementwise]") {
  Tensor a = from_vector(std::vector<double>{1, 2, 3}, {3, 1});
  Tensor b = from_vector(std::vector<double>{10, 20}, {1, 2});
  Tensor c = a * b + a;
  CHECK(c.shape() == Shape{3, 2});
  CHECK(c.to_vector<double>() == std::vector<double>{11, 21, 22, 42, 33, 63});
  CHECK((2.0 / a).to_vector<double>() == std::vector<double>{2, 1, 2.0 / 3});
}

// The engine's accumulation of a value used on two paths (autograd, not one op's math).
TEST_CASE("a tensor used twice accumulates both gradient paths", "[elementwise][autograd]") {
  Tensor x = leaf({4}, 0.5, 2.0);
  CHECK_GRADS(
      [](const std::vector<Tensor>& v) {
        Tensor y = exp(v[0]);  // reused intermediate
        return y * y + sin(y) * v[0];
      },
      {x});
}

TEST_CASE("masked_fill writes the value where the condition holds", "[elementwise]") {
  Tensor a = leaf({2, 3}, -1, 1, 5), b = leaf({3}, -1, 1, 6);
  Tensor cond = gt(a.detach(), scalar_like(0.0, a));
  Tensor m = masked_fill(a, cond, -7.0);
  std::vector<double> av = a.to_vector<double>(), mv = m.to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) CHECK(mv[i] == (av[i] > 0 ? -7.0 : av[i]));
}

TEST_CASE("comparisons give bool tensors", "[elementwise]") {
  Tensor a = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor b = from_vector(std::vector<float>{2, 2, 2}, {3});
  CHECK(lt(a, b).dtype() == DType::Bool);
  CHECK(lt(a, b).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0});
  CHECK(eq(a, b).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  CHECK(ge(a, b).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});
}

TEST_CASE("elementwise errors name the op and the shapes", "[elementwise][errors]") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  CHECK_THROWS_WITH(a + b, Catch::Contains("add") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  CHECK_THROWS_WITH(a * zeros({2, 3}, DType::Float64), Catch::Contains("mul") && Catch::Contains("dtype"));
  CHECK_THROWS_WITH(exp(zeros({2}, DType::Int64)), Catch::Contains("exp") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(clamp(a, 1, 0), Catch::Contains("clamp"));
  CHECK_THROWS_WITH(where(a, a, a), Catch::Contains("where") && Catch::Contains("bool"));
}

TEST_CASE("strided walks follow the output's memory order: permuted dense operands merge to one dim", "[elementwise]") {
  // Two tensors with the same permuted dense layout (the gradient of a permuted view and the view).
  const Tensor base = zeros({2, 3, 4, 5});
  const Tensor a = base.permute({2, 0, 3, 1}), b = zeros({2, 3, 4, 5}).permute({2, 0, 3, 1});
  const MergedDims<2> m = merge_dims<2>(a.shape(), {&a.strides(), &b.strides()});
  REQUIRE(m.sizes.size() == 1);
  CHECK(m.sizes[0] == 120);
  CHECK(m.strides[0][0] == 1);
  CHECK(m.strides[1][0] == 1);
  // The lead operand's memory order decides: a contiguous output beside a permuted input walks the
  // output in order.
  const Tensor out = zeros({4, 2, 5, 3});
  const MergedDims<2> mixed = merge_dims<2>(out.shape(), {&out.strides(), &a.strides()});
  for (size_t d = 1; d < mixed.sizes.size(); ++d) CHECK(mixed.strides[0][d - 1] > mixed.strides[0][d]);
  CHECK(mixed.strides[0].back() == 1);
  // The lever off: the logical order, in which the permuted dims do not merge.
  ScopedLever logical(&Levers::memory_order_walks, false);
  CHECK(merge_dims<2>(a.shape(), {&a.strides(), &b.strides()}).sizes.size() == 4);
}

TEST_CASE("add_ and mul_ write in place, broadcast, and read an aliased operand before writing", "[elementwise]") {
  Generator gen(17);
  const Tensor x0 = randn({4, 4}, DType::Float32, &gen), row = randn({4}, DType::Float32, &gen);
  Tensor x = x0.clone();
  const void* data = x.raw_data();
  x.add_(row, 2.0).mul_(0.5);
  CHECK(x.raw_data() == data);
  CHECK(max_abs_diff(x, (x0 + row * 2.0) * 0.5) == 0.0);
  // The operand is the destination read in another order: the result is x + xᵀ of the old values.
  const Tensor before = x.clone();
  x.add_(x.t());
  CHECK(max_abs_diff(x, before + before.t()) == 0.0);
  CHECK_THROWS_WITH(x.add_(zeros({4, 5})), Catch::Contains("add_") && Catch::Contains("[4, 5]"));
  CHECK_THROWS_WITH(x.add_(x0.to(DType::Float64)), Catch::Contains("add_: dtype mismatch"));
}

TEST_CASE("elementwise outputs follow a densely permuted input's memory order", "[elementwise]") {
  // A channels-last map [N, C, H, W] (dense as [N, H, W, C]): add, gelu and gelu's gradient keep
  // that order, with the values of the contiguous computation.
  const Tensor a = randn({2, 5, 3, 4}).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  const Tensor b = randn({2, 5, 3, 4});
  REQUIRE_FALSE(a.is_contiguous());
  const Tensor sum = a + b, sum_the_other_way = b + a;
  CHECK(sum.strides() == a.strides());
  CHECK(sum_the_other_way.is_contiguous());  // the first operand of the output's shape leads
  CHECK(max_abs_diff(sum, a.contiguous() + b) == 0);
  const Tensor x = a.detach().set_requires_grad(true), y = gelu(x);
  CHECK(y.strides() == a.strides());
  CHECK(max_abs_diff(y, gelu(a.contiguous())) == 0);
  const Tensor g = randn({2, 3, 4, 5}).permute({0, 3, 1, 2});  // the upstream gradient, channels-last too
  y.backward(g);
  const Tensor x_contiguous = a.contiguous().set_requires_grad(true);
  gelu(x_contiguous).backward(g.contiguous());
  CHECK(max_abs_diff(x.grad(), x_contiguous.grad()) < 1e-6);  // SIMD and scalar erf may differ by an ulp
  // Not dense (a slice), or broadcast: contiguous outputs.
  CHECK((randn({4, 6}).narrow(1, 1, 3) + randn({4, 3})).is_contiguous());
  CHECK((randn({4, 1}).expand({4, 3}) * 2.0).is_contiguous());
}
