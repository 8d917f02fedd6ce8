// Half-precision activations (core/autocast.h, `--amp-activations low`): every float32 sample of the
// op table (tests/op_samples/) runs again on every device with its activations in bfloat16 under
// autocast, forward and backward, against the CPU in float32 on the same rounded values
// (check_low_precision_on_devices, tests/device_check.h); float16 too for the norms and softmax,
// whose sums and exponentials are where its narrower range would overflow. (Not for the fused ops:
// their zero-row samples push 1/eps through the backward, beyond float16's range by design.)
// Samples of other dtypes (float64, int64 arithmetic) say nothing about half precision and are
// left out.
// The optimizer family is not here: parameters and their updates stay float32.
#include <catch2/catch.hpp>

#include "tessera/core/levers.h"
#include "tests/op_samples/op_info.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

bool all_float32(const Inputs& inputs) {
  for (const Tensor& t : inputs)
    if (is_floating(t.dtype()) && t.dtype() != DType::Float32) return false;
  return true;
}

void check_family(const std::string& family, DType low) {
  int checked = 0;
  for (const OpInfo& op : family_ops(family))
    for (const SampleInput& sample : op.samples()) {
      if (!all_float32(sample.inputs)) continue;
      check_low_precision_on_devices(std::string(op.name()) + ": " + sample.name, sample.inputs, sample.call,
                                     {low, op.parameters, op.accumulate_result}, sample.device);
      ++checked;
    }
  INFO(family << " has no float32 samples to run in " << dtype_name(low));
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
