#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loop.h"
#include "ops/kernels/copy.h"

namespace tessera {

namespace {

template <class T> double to_double(T v) { return static_cast<double>(v); }
template <> double to_double(BFloat16 v) { return static_cast<float>(v); }
template <> double to_double(Float16 v) { return static_cast<float>(v); }
template <class T> T from_double(double v) { return static_cast<T>(v); }
template <> BFloat16 from_double(double v) { return BFloat16(static_cast<float>(v)); }
template <> Float16 from_double(double v) { return Float16(static_cast<float>(v)); }
template <> bool from_double(double v) { return v != 0.0; }

// Converts through float (not double) when neither side is float64, so float32 -> bfloat16 rounds
// once, exactly as a direct conversion would.
template <class S, class D> D convert(S v) {
  if constexpr (std::is_same_v<S, D>) return v;
  else return from_double<D>(to_double(v));
}

template <class F>
void visit_dtype(DType dt, const F& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float16: return f(Float16{});
    case DType::Bool: return f(bool{});
  }
}

}  // namespace

namespace cpu {

void copy(const Tensor& src, const Tensor& dst) {
  auto plan = cpu::make_plan<2>(dst.shape(), {&dst, &src});
  visit_dtype(src.dtype(), [&](auto s_tag) {
    visit_dtype(dst.dtype(), [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      cpu::for_each_row(plan, [&](std::array<char*, 2> p, const std::array<int64_t, 2>& st, int64_t n) {
        D* d = reinterpret_cast<D*>(p[0]);
        const S* s = reinterpret_cast<const S*>(p[1]);
        if constexpr (std::is_same_v<S, D>) {
          if (st[0] == 1 && st[1] == 1) {
            std::memcpy(d, s, n * sizeof(D));
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i) d[i * st[0]] = convert<S, D>(s[i * st[1]]);
      });
    });
  });
}

void fill(const Tensor& dst, double value) {
  auto plan = cpu::make_plan<1>(dst.shape(), {&dst});
  visit_dtype(dst.dtype(), [&](auto tag) {
    using D = decltype(tag);
    const D v = from_double<D>(value);
    cpu::for_each_row(plan, [&](std::array<char*, 1> p, const std::array<int64_t, 1>& st, int64_t n) {
      D* d = reinterpret_cast<D*>(p[0]);
      for (int64_t i = 0; i < n; ++i) d[i * st[0]] = v;
    });
  });
}

}  // namespace cpu

}  // namespace tessera
