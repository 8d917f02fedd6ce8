// Every sample of the op table (tests/op_samples/) on every device built, against the CPU
// (check_on_devices: forward and backward, contiguous and strided-with-junk inputs), one test per
// family. Coverage is checked, not assumed: while a family's samples run, a KernelObserver records
// every kernel table called on a CUDA device, and the test fails naming each kernel table of that
// family (ops/kernels/registry.h) whose CUDA slot no sample called; a further test fails for a
// kernel table whose family has no samples at all.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "tessera/core/levers.h"
#include "tessera/ops/kernels/registry.h"
#include "tests/op_samples/op_info.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Records the kernel tables called on CUDA devices while it exists.
class CudaCalls : public KernelObserver {
 public:
  CudaCalls() : previous_(KernelObserver::install(this)) {}
  ~CudaCalls() override { KernelObserver::install(previous_); }
  CudaCalls(const CudaCalls&) = delete;
  CudaCalls& operator=(const CudaCalls&) = delete;
  void kernel_begin(const char* op, Device device) override {
    if (device.type == DeviceType::CUDA) called_.insert(op);
  }
  void kernel_end(const char*, Device) noexcept override {}
  bool called(const std::string& table) const { return called_.count(table) > 0; }

 private:
  KernelObserver* previous_;
  std::set<std::string> called_;
};

void check_family(const std::string& family) {
  CudaCalls calls;
  for (const OpInfo& op : family_ops(family))
    for (const SampleInput& sample : op.samples())
      check_on_devices(std::string(op.name()) + ": " + sample.name, sample.inputs, sample.call, sample.device);
  std::string missing;
  for (const KernelTableInfo& table : kernel_tables())
    if (sample_family(table.family) == family && !calls.called(table.name))
      missing += std::string(missing.empty() ? "" : ", ") + table.name;
  INFO("kernel tables whose CUDA slot no sample of " << family << " called: " << missing);
  CHECK(missing.empty());
}

}  // namespace

TEST_CASE("op samples of the elementwise ops on every device", "[cuda][op_samples][elementwise]") {
  check_family("elementwise");
}
TEST_CASE("op samples of the reductions on every device", "[cuda][op_samples][reduce]") { check_family("reduce"); }
TEST_CASE("op samples of softmax on every device", "[cuda][op_samples][softmax]") { check_family("softmax"); }
TEST_CASE("op samples of the losses on every device", "[cuda][op_samples][loss]") { check_family("loss"); }
TEST_CASE("op samples of matmul and linear on every device", "[cuda][op_samples][linalg]") { check_family("linalg"); }
TEST_CASE("op samples of the convolutions on every device", "[cuda][op_samples][conv]") { check_family("conv"); }
TEST_CASE("op samples of the normalizations on every device", "[cuda][op_samples][normalization]") {
  check_family("normalization");
}
TEST_CASE("op samples of the indexing ops on every device", "[cuda][op_samples][indexing]") {
  check_family("indexing");
}
TEST_CASE("op samples of interpolate on every device", "[cuda][op_samples][interpolate]") {
  check_family("interpolate");
}
TEST_CASE("op samples of the fused ops on every device", "[cuda][op_samples][fused]") { check_family("fused"); }
TEST_CASE("op samples of the optimizer ops on every device", "[cuda][op_samples][optim]") { check_family("optim"); }
TEST_CASE("op samples of the views and copies on every device", "[cuda][op_samples][views]") { check_family("views"); }

// With TESSERA_WARP_ROWS=0 (core/levers.h) the block-per-row kernels take the short rows too, which
// the samples above send to the warp-per-row ones (cuda/warp_rows.h): the same samples through them.
TEST_CASE("softmax and layer norm samples with the warp-per-row kernels off", "[cuda][op_samples][levers]") {
  ScopedLever block_rows(&Levers::warp_rows, false);
  check_family("softmax");
  check_family("normalization");
}

// With TESSERA_DEPTHWISE_ANY_LAYOUT=0 the depthwise convolutions take NCHW copies to cuDNN (the
// emulator's reference of it), which the samples above send to our own kernels in any layout; so do
// the convolution gradients of depthwise_conv2d_gelu's NCHW samples.
TEST_CASE("convolution samples with the depthwise any-layout kernels off", "[cuda][op_samples][levers]") {
  ScopedLever cudnn(&Levers::depthwise_any_layout, false);
  check_family("conv");
  check_family("fused");
}

// With TESSERA_DEPTHWISE_CUDNN_NHWC=1 the depthwise convolutions of token maps go to cuDNN's NHWC
// path as they lie (channels-last, tests/cuda/test_device_semantics.cpp counts the copies), the
// other depthwise samples to its NCHW path, copied where they lie otherwise; so do the convolution
// gradients of depthwise_conv2d_gelu.
TEST_CASE("convolution samples with cuDNN's NHWC depthwise path", "[cuda][op_samples][levers]") {
  ScopedLever nhwc(&Levers::depthwise_cudnn_nhwc, true);
  check_family("conv");
  check_family("fused");
}

// With TESSERA_SHARED_OPT_IN=0 talking_heads_attention's tiles fit the 48 KB every kernel has, where
// the samples above take up to 227 KB a block (their kernels opting in): the same samples in them.
TEST_CASE("talking-heads samples in tiles of 48 KB", "[cuda][op_samples][levers]") {
  ScopedLever no_opt_in(&Levers::shared_opt_in, false);
  for (const OpInfo& op : family_ops("fused"))
    if (op.op == OpId::talking_heads_attention)
      for (const SampleInput& sample : op.samples())
        check_on_devices(std::string(op.name()) + ": " + sample.name, sample.inputs, sample.call, sample.device);
}

// With TESSERA_BIAS_GRAD_EPILOGUE=0 a linear layer's bias gradient is the reduction's again, which
// the samples above take from the weight gradient's GEMM epilogue (the reference of cuBLASLt's BGRADB).
TEST_CASE("matmul and linear samples with the bias-gradient epilogue off", "[cuda][op_samples][levers]") {
  ScopedLever reduction(&Levers::bias_grad_epilogue, false);
  check_family("linalg");
}

TEST_CASE("every kernel table belongs to a family of op samples", "[cuda][op_samples][coverage]") {
  for (const KernelTableInfo& table : kernel_tables()) {
    INFO(table.name << " of family " << table.family);
    CHECK_NOTHROW(family_ops(sample_family(table.family)));
  }
}
