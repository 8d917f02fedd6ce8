// bfloat16 on the CPU through whole models (tests/bf16_training_check.h): every family and hybrid
// trains 50 SGD steps under the CPU's bfloat16 autocast as it does in float32, on the portable path
// (what a CPU without bfloat16 instructions runs; on the CPU's own: tests/test_cpu_bf16_native.cpp).
#include <catch2/catch.hpp>

#include "tessera/core/levers.h"
#include "tests/bf16_training_check.h"
#include "tests/sanitized.h"

using namespace tessera;

TEST_CASE("cpu bfloat16: every family and hybrid trains 50 steps as in float32 (portable path)", "[cpu_bf16][models]") {
  ScopedLever portable(&Levers::cpu_bf16_native, false);
  testing::check_bf16_training_as_float32(Device::cpu(), testing::kCpuBf16TrainingSteps);
}
