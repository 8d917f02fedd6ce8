#include "tessera/ops/kernels/reduce.h"

#include <algorithm>

#include "tessera/autograd/grad_mode.h"

namespace tessera {

bool reduces_leading_dims(const Shape& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  return true;
}

Tensor with_dims_last(const Tensor& x, const Shape& dims) {
  Shape order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) order.push_back(d);
  order.insert(order.end(), dims.begin(), dims.end());
  NoGradGuard no_grad;
  return x.detach().permute(order).contiguous();
}

}  // namespace tessera
