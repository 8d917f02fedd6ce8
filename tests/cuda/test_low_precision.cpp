// Half-precision activations (core/autocast.h, `--amp-activations low`): every float32 sample of the
// op table (tests/op_samples/) runs again on every device with its activations in bfloat16 under
// autocast, forward and backward, against the CPU in float32 on the same rounded values
// (check_low_precision_on_devices, tests/device_check.h); float16 too for the norms and softmax,
// whose sums and exponentials are where its narrower range would overflow. (Not for the fused ops:
// their zero-row samples push 1/eps through the backward, beyond float16's range by design.)
// Samples of other dtypes (float64, int64 arithmetic) say nothing about half precision and are
// left out.
// The optimizer family is not here: parameters and their updates stay float32. The last test holds
// cuda's bfloat16 kernels against the CPU's own bfloat16 kernels.
#include <catch2/catch.hpp>

#include "tessera/core/levers.h"
#include "tests/op_samples/op_info.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

void check_family(const std::string& family, DType low) {
  const int checked = check_family_in_low_precision(family, low, test_devices());
  INFO(family << " has no float32 samples to run in " << dtype_name(low));
  CHECK(checked > 0);
}

// cuda's bfloat16 kernels against the CPU's (tests/test_cpu_bf16*.cpp): the same formulas in the
// same precision, so they agree as each does with float32.
void check_family_against_cpu_bf16(const std::string& family) {
  const int checked = check_family_in_low_precision(family, DType::BFloat16, test_devices(), true);
  INFO(family << " has no float32 samples to run in bfloat16");
  CHECK(checked > 0);
}

}  // namespace

TEST_CASE("bfloat16 activations: the elementwise ops", "[cuda][low_precision][elementwise]") {
  check_family("elementwise", DType::BFloat16);
}
TEST_CASE("bfloat16 activations: the reductions", "[cuda][low_precision][reduce]") {
  check_family("reduce", DType::BFloat16);
}
TEST_CASE("bfloat16 activations: softmax", "[cuda][low_precision][softmax]") {
  check_family("softmax", DType::BFloat16);
  check_family("softmax", DType::Float16);
}
TEST_CASE("bfloat16 activations: the losses take them in float32", "[cuda][low_precision][loss]") {
  check_family("loss", DType::BFloat16);
}
TEST_CASE("bfloat16 activations: matmul and linear", "[cuda][low_precision][linalg]") {
  check_family("linalg", DType::BFloat16);
}
TEST_CASE("bfloat16 activations: the convolutions", "[cuda][low_precision][conv]") {
  check_family("conv", DType::BFloat16);
  // cuDNN's NHWC path (the emulator's reference of it) for the depthwise ones of token maps.
  ScopedLever nhwc(&Levers::depthwise_cudnn_nhwc, true);
  check_family("conv", DType::BFloat16);
}
TEST_CASE("bfloat16 activations: the normalizations", "[cuda][low_precision][normalization]") {
  check_family("normalization", DType::BFloat16);
  check_family("normalization", DType::Float16);
}
TEST_CASE("bfloat16 activations: the indexing ops", "[cuda][low_precision][indexing]") {
  check_family("indexing", DType::BFloat16);
}
TEST_CASE("bfloat16 activations: interpolate", "[cuda][low_precision][interpolate]") {
  check_family("interpolate", DType::BFloat16);
}
TEST_CASE("bfloat16 activations: the fused ops", "[cuda][low_precision][fused]") {
  check_family("fused", DType::BFloat16);
}
TEST_CASE("bfloat16 activations: the views and copies", "[cuda][low_precision][views]") {
  check_family("views", DType::BFloat16);
}

TEST_CASE("bfloat16 on cuda and on the CPU agree, every op family", "[cuda][low_precision][cpu_bf16]") {
  for (const char* family : {"elementwise", "reduce", "softmax", "loss", "linalg", "conv", "normalization", "indexing",
                             "interpolate", "fused", "views"}) {
    INFO(family);
    check_family_against_cpu_bf16(family);
  }
}
