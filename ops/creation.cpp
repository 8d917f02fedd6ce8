#include "tessera/ops/creation.h"

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "tessera/ops/kernels/registry.h"

namespace tessera {

double Generator::uniform_at(uint64_t counter) const { return random_draw::uniform(seed_, counter); }
double Generator::normal_at(uint64_t counter) const { return random_draw::normal(seed_, counter); }

struct Generator::CapturedStream {
  uint64_t capture;    // core's capture_id() of the capture it belongs to
  Tensor state;        // {seed, offset}, int64 bits, on the capturing device
  uint64_t drawn = 0;  // counters the captured kernels draw at each replay
};

Generator::KernelDraw Generator::reserve_for_kernel(Device device, uint64_t n) {
  const uint64_t capture = capture_id();
  if (device.is_cpu() || capture == 0) return {seed_, reserve(n), nullptr};
  if (!captured_ || captured_->capture != capture) {
    // First draw of this capture. The host fills the state before each replay, then moves this
    // generator past the replay's draws; no recorded kernel may reuse its memory.
    Tensor state;
    {
      AllocateOutsideGraph outside;
      state = Tensor::empty({2}, DType::Int64, device);
    }
    captured_ = std::make_shared<CapturedStream>(CapturedStream{capture, state});
    before_each_replay([this, stream = captured_] {
      stream->state.copy_(
          from_vector(std::vector<int64_t>{static_cast<int64_t>(seed_), static_cast<int64_t>(offset_)}, {2})
              .to(stream->state.device()));
      offset_ += stream->drawn;
    });
  }
  TS_CHECK(captured_->state.device() == device, "random draw on ", device.str(), " inside a CUDA Graph capture of ",
           captured_->state.device().str(), ": a graph records one device's work");
  const uint64_t first = captured_->drawn;
  captured_->drawn += n;
  return {0, first, static_cast<const uint64_t*>(captured_->state.device_raw_data())};
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
Tensor scalar_tensor(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor constant_scalar(double value, const Tensor& like) {
  if (like.device().is_cpu()) return scalar_like(value, like);
  // Never freed (a graph may read one for as long as it lives), and bounded: past the bound the
  // constants are made afresh, as scalar_like makes them. A capture reads the constants made before
  // it (so a graph of a step holds no fills an eager step does not make) but adds none: one made
  // while capturing would be filled only when the graph replays.
  constexpr size_t kMaxConstants = 4096;
  using Key = std::tuple<uint64_t, DType, DeviceType, int>;
  static std::mutex mutex;
  static auto* constants = new std::map<Key, Tensor>();
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  const Key key{bits, like.dtype(), like.device().type, like.device().index};
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = constants->find(key); it != constants->end()) return it->second;
  if (capture_in_progress()) return scalar_like(value, like);
  Tensor made = scalar_like(value, like);
  if (constants->size() < kMaxConstants) constants->emplace(key, made);
  return made;
}

namespace {
// Draws `shape` values of `params.kind` on `device`, reserving one counter per element from gen:
// a given seed gives the same values on every device and in float32 and float64 (each value is
// drawn in float64 and rounded once).
Tensor random_tensor(const Shape& shape, DType dtype, Device device, const char* op, Generator& gen,
                     RandomParams params) {
  TS_CHECK(is_floating(dtype), op, ": dtype must be floating, got ", dtype_name(dtype));
  // The kernels write float32 or float64; half types are rounded from float32.
  const bool direct = dtype == DType::Float32 || dtype == DType::Float64;
  Tensor t = Tensor::empty(shape, direct ? dtype : DType::Float32, device);
  const Generator::KernelDraw d = gen.reserve_for_kernel(device, static_cast<uint64_t>(t.numel()));
  params.seed = d.seed;
  params.first = d.first;
  params.replayed_stream = d.replayed_stream;
  if (t.numel() > 0) random_kernel[device](params, t);
  return t.to(dtype);
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
}  // namespace

Tensor randn(const Shape& shape, DType dtype, Generator* gen, Device device) {
  return random_tensor(shape, dtype, device, "randn", gen ? *gen : default_generator(), {RandomKind::Normal});
}

Tensor rand(const Shape& shape, DType dtype, Generator* gen, Device device) {
  return random_tensor(shape, dtype, device, "rand", gen ? *gen : default_generator(), {RandomKind::Uniform});
}

Tensor trunc_normal(const Shape& shape, double mean, double std, double a, double b, DType dtype, Generator* gen,
                    Device device) {
  TS_CHECK(std > 0 && a < b, "trunc_normal: expected std > 0 and a < b, got std=", std, " a=", a, " b=", b);
  // x = mean + std·√2·erfinv(u), u uniform on the image of [a, b] under 2Φ(·)-1.
  const double lo = 2 * normal_cdf((a - mean) / std) - 1, hi = 2 * normal_cdf((b - mean) / std) - 1;
  TS_CHECK(hi > lo, "trunc_normal: [", a, ", ", b, "] has no probability mass under N(", mean, ", ", std, "²)");
  RandomParams params{RandomKind::TruncNormal};
  params.mean = mean;
  params.std = std;
  params.a = a;
  params.b = b;
  params.lo = lo;
  params.hi = hi;
  return random_tensor(shape, dtype, device, "trunc_normal", gen ? *gen : default_generator(), params);
}

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  TS_CHECK(step != 0, "arange: step must be non-zero");
  TS_CHECK((end - start) / step >= 0, "arange: range [", start, ", ", end, ") is empty for step ", step,
           " in the wrong direction");
  int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = Tensor::empty({n}, DType::Float64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + step * static_cast<double>(i);
  return t.to(dtype).to(device);
}

Tensor arange(int64_t end, DType dtype, Device device) {
  return arange(0.0, static_cast<double>(end), 1.0, dtype, device);
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
