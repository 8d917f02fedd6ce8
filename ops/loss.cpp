// Cross-entropy losses: argument and target-value checks, the fused kernel (ops/kernels/loss.h),
// the batch mean, and one autograd node per loss. d loss / d target_probs = (lse − x)/N for soft
// targets (composed: it is rarely needed). Half-precision logits (autocast's low activations) are
// taken in float32 by a recorded cast: a loss is a sum over classes and samples, and its gradient
// arrives back in the logits' dtype, as under torch.autocast.
#include "tessera/ops/loss.h"

#include <cmath>

#include "tessera/autograd/function.h"
#include "tessera/ops/autocast_operands.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/op_list.h"

namespace tessera {

namespace {

void check_logits(const Tensor& logits, const char* op) {
  TS_CHECK(logits.defined(), op, ": logits are an undefined tensor");
  TS_CHECK(is_floating(logits.dtype()), op, ": expected floating logits, got ", describe(logits));
  TS_CHECK(logits.dim() == 2, op, ": expected logits of shape [N, C], got ", logits.shape());
  TS_CHECK(logits.shape()[0] > 0 && logits.shape()[1] > 0, op, ": logits ", logits.shape(),
           " have no rows or no classes");
}

// Every target must be a class index in [0, C): the first offender is named with its position
// (on a device, at the next synchronisation: ops/kernels/checks.h).
void check_class_targets(const Tensor& logits, const Tensor& target) {
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  TS_CHECK(target.defined(), "cross_entropy: target is an undefined tensor");
  TS_CHECK(target.dtype() == DType::Int64, "cross_entropy: expected int64 class indices as target, got ",
           describe(target), " (use soft_cross_entropy for probability targets)");
  TS_CHECK(target.shape() == Shape{N}, "cross_entropy: expected target of shape [", N, "] for logits ", logits.shape(),
           ", got ", target.shape());
  TS_CHECK(target.device() == logits.device(), "cross_entropy: target is ", describe(target), " but logits are ",
           describe(logits));
  check_range_kernel[target.device()](
      target, C,
      {"cross_entropy: target",
       detail::concat("is out of range for ", C, " classes (expected 0 <= target < ", C, ")")});
}

// mean_i loss_i of the fused kernel, with its gradient w.r.t. logits (and soft targets).
Tensor mean_cross_entropy(const char* name, const Tensor& logits, const Tensor& target, double label_smoothing) {
  const int64_t N = logits.shape()[0];
  Tensor x = logits.detach().contiguous(), t = target.detach().contiguous();
  Tensor rows = Tensor::empty({N}, x.dtype(), x.device());
  Tensor lse = Tensor::empty({N}, x.dtype(), x.device());
  cross_entropy_kernel[x.device()](x, t, label_smoothing, rows, lse);
  Tensor loss = sum(rows) / static_cast<double>(N);
  if (autograd::needs_grad({logits, target}))
    autograd::record("CrossEntropyBackward", {logits, target}, loss,
                     [name, N, label_smoothing, sx = SavedTensor(x), st = SavedTensor(t), sl = SavedTensor(lse)](
                         const Tensor& g, const GradMask& needs) {
                       Tensor xv = sx.unpack(name), tv = st.unpack(name), lv = sl.unpack(name);
                       Tensor scale = g.reshape({}) / static_cast<double>(N);
                       Tensor gx, gt;
                       if (needs[0]) {
                         gx = Tensor::empty(xv.shape(), xv.dtype(), xv.device());
                         cross_entropy_backward_kernel[xv.device()](xv, tv, lv, label_smoothing, scale, gx);
                       }
                       if (needs[1]) gt = (lv.unsqueeze(1) - xv) * scale;
                       return std::vector<Tensor>{gx, gt};
                     });
  return loss;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, double label_smoothing) {
  check_logits(logits_in, op_name(OpId::cross_entropy));
  const Tensor logits = in_accumulate_dtype(logits_in);
  TS_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy: label_smoothing must be in [0, 1], got ",
           label_smoothing);
  check_class_targets(logits, target);
  return mean_cross_entropy("cross_entropy", logits, target, label_smoothing);
}

Tensor soft_cross_entropy(const Tensor& logits_in, const Tensor& target_in) {
  check_logits(logits_in, op_name(OpId::soft_cross_entropy));
  TS_CHECK(target_in.defined(), "soft_cross_entropy: target_probs is an undefined tensor");
  const Tensor logits = in_accumulate_dtype(logits_in), target_probs = in_accumulate_dtype(target_in);
  TS_CHECK(target_probs.shape() == logits.shape(), "soft_cross_entropy: expected target_probs of the logits' shape ",
           logits.shape(), ", got ", target_probs.shape());
  TS_CHECK(target_probs.dtype() == logits.dtype() && target_probs.device() == logits.device(),
           "soft_cross_entropy: target_probs is ", describe(target_probs), " but logits are ", describe(logits));
  return mean_cross_entropy("soft_cross_entropy", logits, target_probs, 0.0);
}

}  // namespace tessera
