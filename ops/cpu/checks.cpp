// CPU kernel of the data-dependent checks: the first offending value, in row-major order, throws.
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/loop.h"

namespace tessera::cpu {

void check_range(const Tensor& values, int64_t limit, const RangeCheck& check) {
  if (values.numel() == 0) return;
  const Tensor c = values.contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t i = 0; i < c.numel(); ++i)
    if (p[i] < 0 || p[i] >= limit) throw Error(check.message(p[i], i));
}

}  // namespace tessera::cpu
