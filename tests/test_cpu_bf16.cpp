// bfloat16 on the CPU (core/autocast.h), on the portable path: what a CPU without bfloat16
// instructions runs (TESSERA_CPU_BF16_NATIVE=0 selects it on one that has them). The same checks on
// the CPU's own instructions are in tests/test_cpu_bf16_native.cpp, which reports itself skipped
// on a CPU without them.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "tessera/core/autocast.h"
#include "tessera/core/cpu_features.h"
#include "tessera/core/half.h"
#include "tessera/core/levers.h"
#include "tessera/ops/cpu/bf16_runs.h"
#include "tessera/ops/ops.h"
#include "tests/cpu_bf16_families.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// float32 bit patterns that exercise every rounding case: each bfloat16 value's pattern with the
// low half 0 (exact), 0x7fff (just below the tie), 0x8000 (the tie: to even), 0x8001, 0xffff and a
// pseudo-random low half; the float32 subnormals, infinities and NaNs among them come for free.
std::vector<uint32_t> rounding_patterns() {
  std::vector<uint32_t> bits;
  uint32_t state = 12345;
  for (uint32_t high = 0; high < 0x10000; ++high)
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, (state = state * 1664525u + 1013904223u) >> 16})
      bits.push_back(high << 16 | low);
  return bits;
}

std::vector<float> as_floats(const std::vector<uint32_t>& bits) {
  std::vector<float> f(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) f[i] = bits_float(bits[i]);
  return f;
}

}  // namespace

TEST_CASE("cpu bfloat16: the portable conversion rounds as core/half.h, every rounding case", "[cpu_bf16][convert]") {
  const std::vector<uint32_t> bits = rounding_patterns();
  const std::vector<float> f = as_floats(bits);
  std::vector<BFloat16> got(f.size());
  cpu::float_to_bf16_portable(f.data(), got.data(), static_cast<int64_t>(f.size()));
  std::vector<float> rounded = f;
  cpu::round_floats_to_bf16(rounded.data(), static_cast<int64_t>(rounded.size()));
  std::vector<float> back(f.size());
  cpu::bf16_to_float(got.data(), back.data(), static_cast<int64_t>(got.size()));
  int64_t mismatches = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const uint16_t want = float_to_bf16_bits(f[i]);
    const bool same = got[i].bits == want && float_bits(rounded[i]) == static_cast<uint32_t>(want) << 16 &&
                      float_bits(back[i]) == static_cast<uint32_t>(want) << 16;
    if (!same && mismatches++ < 5)
      FAIL_CHECK("input 0x" << std::hex << bits[i] << ": 0x" << got[i].bits << " (rounded in place 0x"
                            << float_bits(rounded[i]) << ") vs core/half.h's 0x" << want);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("cpu bfloat16: a copy to and from bfloat16 converts as core/half.h", "[cpu_bf16][convert]") {
  const Tensor x = randu({3, 1000}, -40, 40, 3);
  const Tensor low = x.to(DType::BFloat16);
  const std::vector<float> xs = x.to_vector<float>();
  const Tensor back = low.to(DType::Float32);
  const std::vector<float> bs = back.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i)
    REQUIRE(float_bits(bs[i]) == static_cast<uint32_t>(float_to_bf16_bits(xs[i])) << 16);
  // A strided view converts element by element, to the same bits.
  const Tensor t = x.t().to(DType::BFloat16).to(DType::Float32).t();
  CHECK(t.contiguous().to_vector<float>() == bs);
}

TEST_CASE("cpu bfloat16: autocast on the CPU takes bfloat16 and refuses float16 with the reason", "[cpu_bf16][amp]") {
  { AutocastGuard ok(DeviceType::CPU, DType::BFloat16); }
  CHECK_THROWS_WITH(AutocastGuard(DeviceType::CPU, DType::Float16), Catch::Contains("float16 runs on cuda only"));
}

TEST_CASE("cpu bfloat16: a kernel given float16 on the CPU names the op and the dtypes it takes", "[cpu_bf16][amp]") {
  const Tensor h = randu({4, 4}).to(DType::Float16);
  CHECK_THROWS_WITH(exp(h), Catch::Contains("float16") && Catch::Contains("bfloat16"));
}

TEST_CASE("cpu bfloat16: linear under autocast gives bfloat16, its parameters' gradients float32", "[cpu_bf16][amp]") {
  ScopedLever portable(&Levers::cpu_bf16_native, false);
  Tensor w = randu({16, 32}, -0.2, 0.2, 1).set_requires_grad();
  Tensor b = randu({16}, -0.2, 0.2, 2).set_requires_grad();
  const Tensor x = randu({8, 32});
  Tensor y;
  {
    AutocastGuard autocast(DeviceType::CPU, DType::BFloat16);
    y = linear(x, w, b);
  }
  CHECK(y.dtype() == DType::BFloat16);
  y.to(DType::Float32).sum().backward();
  CHECK(w.grad().dtype() == DType::Float32);
  CHECK(b.grad().dtype() == DType::Float32);
  const Tensor want =
      linear(x.to(DType::BFloat16).to(DType::Float32), w.detach().to(DType::BFloat16).to(DType::Float32),
             b.detach().to(DType::BFloat16).to(DType::Float32));
  // The same products summed in float32, then one rounding to bfloat16 (2^-9 relative at most).
  DeviceCheckOptions once;
  once.rtol = 1.0 / 256;
  once.atol = 1e-6;
  CHECK(compare_values(y.to(DType::Float32), want, once) == "");
}

TS_CPU_BF16_FAMILY_TESTS("cpu bfloat16 (portable)", false, "[cpu_bf16][low_precision]")
