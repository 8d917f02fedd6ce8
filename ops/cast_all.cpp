#include "tessera/ops/cast_all.h"

#include <map>

#include "tessera/autograd/function.h"
#include "tessera/ops/kernels/registry.h"

namespace tessera {

namespace {

// dsts[i] = srcs[i] converted (fresh contiguous dsts, equal shapes, one device): the contiguous
// sources of each pair of dtypes in one launch of the cast_all kernel, any other source by the copy
// kernel.
void convert_all(const std::vector<Tensor>& srcs, const std::vector<Tensor>& dsts) {
  std::map<std::pair<DType, DType>, std::pair<std::vector<Tensor>, std::vector<Tensor>>> by_dtypes;
  for (size_t i = 0; i < srcs.size(); ++i) {
    if (srcs[i].is_contiguous()) {
      auto& [from, to] = by_dtypes[{srcs[i].dtype(), dsts[i].dtype()}];
      from.push_back(srcs[i]);
      to.push_back(dsts[i]);
    } else {
      copy_kernel[dsts[i].device()](srcs[i], dsts[i]);
    }
  }
  for (const auto& [dtypes, lists] : by_dtypes)
    cast_all_kernel[lists.second.front().device()](lists.first, lists.second);
}

}  // namespace

std::vector<Tensor> cast_all(const std::vector<Tensor>& tensors, DType dtype) {
  std::vector<Tensor> out = tensors, srcs, made;
  std::vector<DType> source_dtypes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.defined(), "cast_all: tensor ", i, " is undefined");
    TS_CHECK(t.device() == tensors.front().device(), "cast_all: tensor ", i, " is ", describe(t), " but tensor 0 is ",
             describe(tensors.front()), " (the tensors must be on one device)");
    if (t.dtype() == dtype) continue;
    out[i] = Tensor::empty(t.shape(), dtype, t.device());
    srcs.push_back(t);
    made.push_back(out[i]);
    source_dtypes.push_back(t.dtype());
  }
  if (srcs.empty()) return out;
  convert_all(srcs, made);
  if (autograd::needs_grad(srcs) && is_floating(dtype))
    autograd::record("CastAllBackward", srcs, made,
                     [source_dtypes](const std::vector<Tensor>& grads, const GradMask& needs) {
                       std::vector<Tensor> result(grads.size()), from, to;
                       for (size_t i = 0; i < grads.size(); ++i) {
                         if (!needs[i] || !grads[i].defined()) continue;
                         result[i] = Tensor::empty(grads[i].shape(), source_dtypes[i], grads[i].device());
                         from.push_back(grads[i]);
                         to.push_back(result[i]);
                       }
                       if (!from.empty()) convert_all(from, to);
                       return result;
                     });
  return out;
}

}  // namespace tessera
