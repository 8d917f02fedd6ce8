// Elementwise ops, random draws and dropout on device cuda against the CPU (tests/device_check.h).
#include <catch2/catch.hpp>

#include "tessera/nn/layers.h"
#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

TEST_CASE("unary ops and their gradients on cuda", "[cuda][elementwise]") {
  const Tensor x = randu({6, 9}), pos = randu({6, 9}, 0.1, 2.0);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"neg", [](const Tensor& t) { return -t; }},
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"erf", [](const Tensor& t) { return erf(t); }},
      {"sin", [](const Tensor& t) { return sin(t); }},
      {"cos", [](const Tensor& t) { return cos(t); }},
      {"abs", [](const Tensor& t) { return abs(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"silu", [](const Tensor& t) { return silu(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"gelu tanh", [](const Tensor& t) { return gelu(t, true); }},
      {"pow 2", [](const Tensor& t) { return pow(t, 2.0); }},
      {"pow 3", [](const Tensor& t) { return pow(t, 3.0); }},
      {"clamp", [](const Tensor& t) { return clamp(t, -0.3, 0.4); }},
  };
  for (const auto& [name, f] : ops) check_on_devices(name, {x}, [f = f](const Inputs& in) { return f(in[0]); });
  // Ops defined on positive inputs only.
  check_on_devices("log", {pos}, [](const Inputs& in) { return log(in[0]); });
  check_on_devices("sqrt", {pos}, [](const Inputs& in) { return sqrt(in[0]); });
  check_on_devices("rsqrt", {pos}, [](const Inputs& in) { return rsqrt(in[0]); });
  check_on_devices("pow 0.5", {pos}, [](const Inputs& in) { return pow(in[0], 0.5); });
}

TEST_CASE("binary ops with broadcasting and their gradients on cuda", "[cuda][elementwise]") {
  const Tensor a = randu({4, 1, 5}), b = randu({3, 1}, 0.5, 1.5, 11);
  check_on_devices("add", {a, b}, [](const Inputs& in) { return in[0] + in[1]; });
  check_on_devices("sub", {a, b}, [](const Inputs& in) { return in[0] - in[1]; });
  check_on_devices("mul", {a, b}, [](const Inputs& in) { return in[0] * in[1]; });
  check_on_devices("div", {a, b}, [](const Inputs& in) { return in[0] / in[1]; });
  check_on_devices("pow", {b, a}, [](const Inputs& in) { return pow(in[0], in[1]); });
  check_on_devices("maximum", {a, b}, [](const Inputs& in) { return maximum(in[0], in[1]); });
  check_on_devices("minimum", {a, b}, [](const Inputs& in) { return minimum(in[0], in[1]); });
  check_on_devices("scalar ops", {a}, [](const Inputs& in) { return (2.0 - in[0]) * 3.0 / (in[0] + 4.0); });
  check_on_devices("float64", {a.to(DType::Float64), b.to(DType::Float64)},
                   [](const Inputs& in) { return in[0] * in[1] + in[0]; });
}

TEST_CASE("comparisons, where and int64 arithmetic on cuda", "[cuda][elementwise]") {
  const Tensor a = randu({5, 6}), b = randu({6}, -1, 1, 3);
  for (auto [name, f] : std::vector<std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"eq", eq}, {"ne", ne}, {"lt", lt}, {"le", le}, {"gt", gt}, {"ge", ge}})
    check_on_devices(name, {a, b}, [f = f](const Inputs& in) { return f(in[0], in[1]); });
  check_on_devices("where", {gt(a, b), a, b}, [](const Inputs& in) { return where(in[0], in[1], in[2]); });
  check_on_devices("masked_fill", {a, lt(b, scalar_like(0.0, b))},
                   [](const Inputs& in) { return masked_fill(in[0], in[1], -9.0); });
  const Tensor ia = (a * 10.0).to(DType::Int64), ib = (b * 10.0).to(DType::Int64);
  check_on_devices("int64 add", {ia, ib}, [](const Inputs& in) { return in[0] + in[1] * in[1]; });
  check_on_devices("int64 maximum", {ia, ib}, [](const Inputs& in) { return maximum(in[0], in[1]); });
  check_on_devices("int64 compare", {ia, ib}, [](const Inputs& in) { return le(in[0], in[1]); });
}

TEST_CASE("random draws on cuda equal the CPU's for the same generator state", "[cuda][random]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator g_cpu(99), g_dev(99);
    CHECK(rand({1000}, dtype, &g_cpu).to_vector<double>() == rand({1000}, dtype, &g_dev, Device::cuda()).to_vector<double>());
    CHECK(g_cpu.offset() == g_dev.offset());
    // Normals and truncated normals go through log/cos/sqrt/erfinv, which may differ in the last bit.
    testing::DeviceCheckOptions opt;
    opt.rtol = 1e-12;
    opt.atol = 1e-12;
    CHECK(testing::compare_values(randn({1000}, dtype, &g_dev, Device::cuda()), randn({1000}, dtype, &g_cpu), opt) == "");
    CHECK(testing::compare_values(trunc_normal({1000}, 0.0, 0.02, -2, 2, dtype, &g_dev, Device::cuda()),
                                  trunc_normal({1000}, 0.0, 0.02, -2, 2, dtype, &g_cpu), opt) == "");
  }
}

TEST_CASE("dropout and drop-path masks on cuda are the CPU's", "[cuda][random]") {
  const Tensor x = randu({8, 5, 6});
  check_on_devices("dropout", {x}, [](const Inputs& in) {
    Generator gen(5);
    return dropout(in[0], 0.3, true, &gen);
  });
  check_on_devices("drop_path", {x}, [](const Inputs& in) {
    Generator gen(6);
    return nn::drop_path(in[0], 0.25, true, &gen);
  });
}
