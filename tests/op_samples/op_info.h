// The one table of op samples (after PyTorch's OpInfo): each op family declares, once, the sample
// inputs of its public ops — shapes, dtypes, broadcast and non-contiguous operands, edge sizes (0, 1,
// more than a block) — and every generic check iterates the same list:
//   tests/test_op_samples.cpp          the float64 finite-difference gradient check of every
//                                      differentiable sample, on the CPU (every build);
//   tests/cuda/test_op_samples.cpp     check_on_devices of every sample on every device built
//                                      (contiguous and strided-with-junk inputs, tests/device_check.h),
//                                      and the coverage test: every kernel table's CUDA slot is called
//                                      by some sample, or the test fails naming the tables that are not;
//   tests/cuda/test_low_precision.cpp  every float32 sample again with its activations in bfloat16
//                                      under autocast, against the CPU on the same rounded values;
//   tests/test_cpu_bf16*.cpp           the same on the CPU itself, under the CPU's bfloat16
//                                      autocast (portable and native paths).
// A sample's `call` is the op with that sample's non-tensor arguments (dims, sizes, modes) bound, as a
// function of its tensor inputs.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tessera/ops/op_list.h"
#include "tessera/testing/gradcheck.h"
#include "tests/device_check.h"

namespace tessera::testing {

struct SampleInput {
  std::string name;  // what this sample varies
  Inputs inputs;     // float32 unless the sample is about another dtype
  OpFn call;
  DeviceCheckOptions device = {};  // tolerances on devices; inputs that take no gradient (no_grad)
  // Whether the float64 gradient check runs on this sample. False where finite differences say
  // nothing the other samples do not: sizes that exist for the device kernels' block and chunk paths
  // (the check costs two evaluations per input element), or outputs that hold state rather than a
  // function of the inputs (running statistics updated in place).
  bool gradcheck = true;
};

struct OpInfo {
  OpId op;  // the public op the samples run (ops/op_list.h)
  std::function<std::vector<SampleInput>()> samples;
  bool differentiable = true;  // false: no gradient check (integer, bool or index outputs; in-place updates)
  GradcheckOptions grad = {};
  // For the half-precision samples (tests/cuda/test_low_precision.cpp): the inputs that are
  // per-channel parameters (a norm's weight, a fused op's gamma), which stay float32 beside
  // half-precision activations as a model's master weights do (core/dtype.h accumulate_dtype) ...
  std::vector<size_t> parameters = {};
  // ... and whether the op's floating result is in the accumulation dtype rather than the
  // activations' (losses, stochastic depth's per-sample scale).
  bool accumulate_result = false;
  // What sets these samples apart from the op's others ("tanh form", "scalar operands"), if anything.
  std::string variant = {};

  std::string name() const { return variant.empty() ? op_name(op) : std::string(op_name(op)) + " (" + variant + ")"; }
};

// An OpInfo for one variant of an op: `op`'s samples under `variant`, with the other fields default.
OpInfo variant_of(OpId op, std::string variant, std::function<std::vector<SampleInput>()> samples,
                  bool differentiable = true);

// The table, one function per op family (tests/op_samples/<family>.cpp).
std::vector<OpInfo> elementwise_ops();
std::vector<OpInfo> reduce_ops();
std::vector<OpInfo> softmax_ops();
std::vector<OpInfo> loss_ops();
std::vector<OpInfo> linalg_ops();
std::vector<OpInfo> conv_ops();
std::vector<OpInfo> normalization_ops();
std::vector<OpInfo> indexing_ops();
std::vector<OpInfo> interpolate_ops();
std::vector<OpInfo> fused_ops();
std::vector<OpInfo> optim_ops();
std::vector<OpInfo> view_ops();

// Every float32 sample of `family` (samples of other dtypes say nothing about half precision) run
// with its activations in `low` under autocast on each of `devices`, forward and backward, against
// the CPU in float32 on the same rounded values (check_low_precision_on_devices). Returns how many
// samples ran, which the caller requires to be more than none.
// With reference_in_low, the reference is the same autocast on the CPU instead (cuda's kernels
// against the CPU's).
int check_family_in_low_precision(const std::string& family, DType low, const std::vector<Device>& devices,
                                  bool reference_in_low = false);

// The samples of one family, by the name the op list gives it (ops/op_list.h): "elementwise",
// "reduce", ..., "optim", "views". An unknown name throws, and so does an op whose declared family
// is another (its samples belong in that family's file).
std::vector<OpInfo> family_ops(const std::string& family);
// Every family's samples, in the op list's family order.
std::vector<OpInfo> all_op_samples();
// The family whose samples call the kernel tables of a registry family: its own, or for the
// families no public op family has (copy, random, checks), the one whose samples call them.
std::string sample_family(const std::string& registry_family);

// int64 values in [0, n), reproducible by seed; repeats are certain when the tensor has more than n
// elements.
Tensor random_index(const Shape& shape, int64_t n, uint64_t seed);
// A 1-d int64 tensor of these values.
Tensor ints(const std::vector<int64_t>& values);
// The tensors of an optimizer sample: one per shape of {1}, {37, 5}, {0}, {}, {331, 317}, {33} (a
// multi-tensor launch walks all of them: one element, none, odd sizes, and more than 100k elements,
// so several blocks take several chunks each), normal values seeded per list.
std::vector<Tensor> optim_list(uint64_t seed, DType dtype = DType::Float32);

}  // namespace tessera::testing
