#include "tessera/ops/kernels/reduce.h"

#include <algorithm>

namespace tessera {

Tensor with_dims_last(const Tensor& x, const Shape& dims) {
  Shape order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) order.push_back(d);
  order.insert(order.end(), dims.begin(), dims.end());
  return x.detach().permute(order).contiguous();  // detached: records no graph in any grad mode
}

}  // namespace tessera
