#include "ops/creation.h"

#include <cmath>
#include <cstring>

#include "ops/kernels/copy.h"

namespace tessera {

// The top 53 bits of one draw, scaled to [0, 1): exact doubles, and several times faster than
// std::uniform_real_distribution (dropout draws one per element).
double Generator::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
double Generator::normal() { return std::normal_distribution<double>(0.0, 1.0)(engine_); }

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
// Fills a float64 host buffer with `draw()` and converts to the requested dtype, so a given seed
// gives the same values in float32 and float64.
template <class Draw>
Tensor host_random(const Shape& shape, DType dtype, const char* op, Draw draw) {
  TS_CHECK(is_floating(dtype), op, ": dtype must be floating, got ", dtype_name(dtype));
  Tensor t = Tensor::empty(shape, DType::Float64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = draw();
  return t.to(dtype);
}
}  // namespace

Tensor randn(const Shape& shape, DType dtype, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return host_random(shape, dtype, "randn", [&] { return g.normal(); });
}

Tensor rand(const Shape& shape, DType dtype, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return host_random(shape, dtype, "rand", [&] { return g.uniform(); });
}

Tensor trunc_normal(const Shape& shape, double mean, double std, double a, double b, DType dtype, Generator* gen) {
  TS_CHECK(std > 0 && a < b, "trunc_normal: expected std > 0 and a < b, got std=", std, " a=", a, " b=", b);
  TS_CHECK(a <= mean + 6 * std && b >= mean - 6 * std, "trunc_normal: [", a, ", ", b,
           "] lies more than 6 std from the mean ", mean, "; rejection sampling would not terminate");
  Generator& g = gen ? *gen : default_generator();
  return host_random(shape, dtype, "trunc_normal", [&] {
    for (;;) {
      double v = mean + std * g.normal();
      if (v >= a && v <= b) return v;
    }
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
