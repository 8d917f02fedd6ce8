// bfloat16 on the CPU's own instructions (AVX-512 BF16, AMX; core/cpu_features.h): the conversion
// instruction gives the portable formula's bits for every input, every op family runs in bfloat16
// on this path as on the portable one (tests/test_cpu_bf16.cpp), every kernel but the GEMMs gives
// the portable path's bits, and every family trains as in float32 (tests/bf16_training_check.h). Where the CPU has no such instructions, this program reports
// itself skipped (tests/cpu_bf16_main.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "tessera/core/autocast.h"
#include "tessera/core/half.h"
#include "tessera/core/levers.h"
#include "tessera/ops/cpu/bf16_runs.h"
#include "tessera/ops/ops.h"
#include "tests/bf16_training_check.h"
#include "tests/cpu_bf16_families.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Random float32 bit patterns (every exponent, subnormals, infinities, NaNs of both signs among
// them) with runs of special values spliced in, so that vectors holding a subnormal or a NaN beside
// normal values take the instruction's fix-up.
std::vector<float> mixed_floats(size_t n) {
  std::vector<float> f(n);
  uint64_t state = 99;
  for (size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = static_cast<uint32_t>(state >> 32);
    if (i % 97 == 0) bits &= 0x807fffffu;   // a subnormal (or zero)
    if (i % 101 == 0) bits |= 0x7f800001u;  // a NaN
    f[i] = bits_float(bits);
  }
  return f;
}

// The outputs and input gradients of one sample under the CPU's bfloat16 autocast, as float32.
std::vector<Tensor> run_in_bf16(const SampleInput& sample, const std::vector<size_t>& parameters) {
  Inputs leaves, operands;
  for (size_t i = 0; i < sample.inputs.size(); ++i) {
    const Tensor& x = sample.inputs[i];
    const bool parameter = std::find(parameters.begin(), parameters.end(), i) != parameters.end();
    Tensor leaf = (x.dtype() == DType::Float32 && !parameter ? x.to(DType::BFloat16) : x).detach().clone();
    const auto& no_grad = sample.device.no_grad;
    if (sample.device.backward && is_floating(x.dtype()) &&
        std::find(no_grad.begin(), no_grad.end(), i) == no_grad.end())
      leaf.set_requires_grad(true);
    leaves.push_back(leaf);
  }
  Tensor out;
  {
    AutocastGuard autocast(DeviceType::CPU, DType::BFloat16);
    out = sample.call(leaves);
  }
  std::vector<Tensor> results{out.to(is_floating(out.dtype()) ? DType::Float32 : out.dtype())};
  if (sample.device.backward && out.requires_grad()) {
    Generator gen(4321);
    out.backward(randn(out.shape(), DType::Float32, &gen).to(out.dtype()));
    for (const Tensor& leaf : leaves)
      if (leaf.requires_grad()) results.push_back(leaf.grad().to(DType::Float32));
  }
  return results;
}

// Whether two results hold the same bits (NaN where NaN).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
  return true;
}

}  // namespace

TEST_CASE("cpu bfloat16 native: VCVTNE2PS2BF16 gives the formula's bits, subnormals and NaNs included",
          "[cpu_bf16][convert]") {
  const std::vector<float> f = mixed_floats(1 << 20);
  // Every length up to two vectors and a tail, from every offset within a vector: the masked tails.
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{31}, int64_t{32}, int64_t{33},
                    int64_t{47}, int64_t{1} << 20})
    for (int64_t offset : {0, 1, 7}) {
      if (offset + n > static_cast<int64_t>(f.size())) continue;
      std::vector<BFloat16> native(n), portable(n);
      cpu::float_to_bf16_native(f.data() + offset, native.data(), n);
      cpu::float_to_bf16_portable(f.data() + offset, portable.data(), n);
      int64_t differ = 0;
      for (int64_t i = 0; i < n; ++i) differ += native[i].bits != portable[i].bits;
      INFO(n << " values from offset " << offset);
      CHECK(differ == 0);
    }
}

TS_CPU_BF16_FAMILY_TESTS("cpu bfloat16 (native)", true, "[cpu_bf16][low_precision]")

TEST_CASE("cpu bfloat16 native: every kernel but the GEMMs gives the portable path's bits",
          "[cpu_bf16][low_precision]") {
  // The products of matmul, linear, the dense convolutions and linear_gelu sum in oneDNN's order on
  // the native path (their tolerance is checked above); every other op's arithmetic is the same
  // code on either path, only its conversions run other instructions.
  const std::set<std::string> gemm_families{"linalg", "conv"};
  int compared = 0;
  for (const OpInfo& op : all_op_samples()) {
    const std::string family = op_decl(op.op).family;
    if (gemm_families.count(family) || op.op == OpId::linear_gelu || family == "optim") continue;
    for (const SampleInput& sample : op.samples()) {
      bool float32 = true;
      for (const Tensor& t : sample.inputs)
        float32 = float32 && (!is_floating(t.dtype()) || t.dtype() == DType::Float32);
      if (!float32) continue;
      std::vector<Tensor> native, portable;
      {
        ScopedLever on(&Levers::cpu_bf16_native, true);
        native = run_in_bf16(sample, op.parameters);
      }
      {
        ScopedLever off(&Levers::cpu_bf16_native, false);
        portable = run_in_bf16(sample, op.parameters);
      }
      INFO(op.name() << ": " << sample.name);
      REQUIRE(native.size() == portable.size());
      for (size_t i = 0; i < native.size(); ++i) {
        INFO((i == 0 ? std::string("output") : "gradient " + std::to_string(i - 1)));
        CHECK(same_bits(native[i], portable[i]));
      }
      ++compared;
    }
  }
  CHECK(compared > 100);
}

TEST_CASE("cpu bfloat16 native: every family and hybrid trains 50 steps as in float32", "[cpu_bf16][models]") {
  ScopedLever native(&Levers::cpu_bf16_native, true);
  check_bf16_training_as_float32(Device::cpu(), kCpuBf16TrainingSteps);
}
