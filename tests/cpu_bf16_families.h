// The op families whose samples run in bfloat16 on the CPU (tests/test_cpu_bf16.cpp on the portable
// path, tests/test_cpu_bf16_native.cpp on the CPU's bfloat16 instructions): one TEST_CASE per
// family, named "<prefix>: <family>", each running every float32 sample of the family under the
// CPU's bfloat16 autocast against float32 on the same rounded values
// (check_family_in_low_precision). The optimizer family is not among them: parameters and their
// updates stay float32.
#pragma once
#include <catch2/catch.hpp>

#include "tessera/core/levers.h"
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

// Every family's samples in bfloat16 on the CPU with the native path on or off.
inline void check_cpu_bf16_family(const std::string& family, bool native) {
  ScopedLever path(&Levers::cpu_bf16_native, native);
  const int checked = check_family_in_low_precision(family, DType::BFloat16, {Device::cpu()});
  INFO(family << " has no float32 samples to run in bfloat16");
  CHECK(checked > 0);
}

}  // namespace tessera::testing

#define TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, FAMILY, TAGS) \
  TEST_CASE(PREFIX ": " FAMILY, TAGS) { ::tessera::testing::check_cpu_bf16_family(FAMILY, NATIVE); }

#define TS_CPU_BF16_FAMILY_TESTS(PREFIX, NATIVE, TAGS)           \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "elementwise", TAGS)   \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "reduce", TAGS)        \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "softmax", TAGS)       \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "loss", TAGS)          \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "linalg", TAGS)        \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "conv", TAGS)          \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "normalization", TAGS) \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "indexing", TAGS)      \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "interpolate", TAGS)   \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "fused", TAGS)         \
  TS_CPU_BF16_FAMILY_TEST(PREFIX, NATIVE, "views", TAGS)
