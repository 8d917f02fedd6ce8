#include "ops/creation.h"

#include <cmath>
#include <cstring>

#include "core/parallel.h"
#include "core/philox.h"
#include "ops/kernels/copy.h"

namespace tessera {

namespace {
constexpr double kTwoPi = 6.283185307179586476925;
// 53 random bits as a double in [0, 1).
double unit(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1.0p-53;
}
}  // namespace

double Generator::uniform_at(uint64_t counter) const {
  auto w = philox4x32(counter, seed_);
  return unit(w[0], w[1]);
}

double Generator::normal_at(uint64_t counter) const {
  auto w = philox4x32(counter, seed_);
  double u1 = 1.0 - unit(w[0], w[1]);  // (0, 1]: log stays finite
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * unit(w[2], w[3]));
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}
void manual_seed(uint64_t seed) { default_generator().seed(seed); }

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  fill_kernel[device](t, value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype(), t.device()); }
Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }
Tensor scalar_like(double value, const Tensor& like) { return full({}, value, like.dtype(), like.device()); }
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

namespace {
// Fills a float64 tensor with draw(counter) for consecutive counters reserved from the generator,
// in parallel, then converts: a given seed gives the same values in float32 and float64.
template <class Draw>
Tensor host_random(const Shape& shape, DType dtype, const char* op, Generator& gen, Draw draw) {
  TS_CHECK(is_floating(dtype), op, ": dtype must be floating, got ", dtype_name(dtype));
  Tensor t = Tensor::empty(shape, DType::Float64);
  double* p = t.data<double>();
  const uint64_t first = gen.reserve(static_cast<uint64_t>(t.numel()));
  parallel_for(0, t.numel(), 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = draw(first + static_cast<uint64_t>(i));
  });
  return t.to(dtype);
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Inverse error function: Giles' approximation (2010), relative error below 4e-7 — ample for
// drawing initial weights, which are float32 anyway, and several times faster than refining it.
double erfinv(double y) {
  if (y <= -1.0) return -INFINITY;
  if (y >= 1.0) return INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = c + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682})
      p = c + p * w;
    x = p * y;
  }
  return x;
}
}  // namespace

Tensor randn(const Shape& shape, DType dtype, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return host_random(shape, dtype, "randn", g, [&](uint64_t c) { return g.normal_at(c); });
}

Tensor rand(const Shape& shape, DType dtype, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return host_random(shape, dtype, "rand", g, [&](uint64_t c) { return g.uniform_at(c); });
}

Tensor trunc_normal(const Shape& shape, double mean, double std, double a, double b, DType dtype, Generator* gen) {
  TS_CHECK(std > 0 && a < b, "trunc_normal: expected std > 0 and a < b, got std=", std, " a=", a, " b=", b);
  Generator& g = gen ? *gen : default_generator();
  // x = mean + std·√2·erfinv(u), u uniform on the image of [a, b] under 2Φ(·)-1.
  const double lo = 2 * normal_cdf((a - mean) / std) - 1, hi = 2 * normal_cdf((b - mean) / std) - 1;
  TS_CHECK(hi > lo, "trunc_normal: [", a, ", ", b, "] has no probability mass under N(", mean, ", ", std, "²)");
  return host_random(shape, dtype, "trunc_normal", g, [&](uint64_t c) {
    double x = mean + std * std::sqrt(2.0) * erfinv(lo + (hi - lo) * g.uniform_at(c));
    return std::min(std::max(x, a), b);
  });
}

Tensor arange(double start, double end, double step, DType dtype) {
  TS_CHECK(step != 0, "arange: step must be non-zero");
  TS_CHECK((end - start) / step >= 0, "arange: range [", start, ", ", end, ") is empty for step ", step,
           " in the wrong direction");
  int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = Tensor::empty({n}, DType::Float64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + step * static_cast<double>(i);
  return t.to(dtype);
}

Tensor arange(int64_t end, DType dtype) { return arange(0.0, static_cast<double>(end), 1.0, dtype); }

Tensor from_blob(const void* data, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  if (t.numel() > 0) std::memcpy(t.raw_data(), data, static_cast<size_t>(t.numel()) * dtype_size(dtype));
  return t;
}

template <class T>
static Tensor from_vector_impl(const std::vector<T>& values, const Shape& shape) {
  TS_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape), "from_vector: ", values.size(),
           " values do not fill shape ", shape, " (", numel_of(shape), " elements)");
  return from_blob(values.data(), shape, DTypeOf<T>::value);
}
Tensor from_vector(const std::vector<float>& v, const Shape& s) { return from_vector_impl(v, s); }
Tensor from_vector(const std::vector<double>& v, const Shape& s) { return from_vector_impl(v, s); }
Tensor from_vector(const std::vector<int64_t>& v, const Shape& s) { return from_vector_impl(v, s); }

}  // namespace tessera
