// CPU kernel of random tensor creation: the shared draw (ops/kernels/random.h) for every element,
// in parallel; the values depend on (seed, counter) only, not on the thread count.
#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"

namespace tessera::cpu {

void random(const RandomParams& params, const Tensor& out) {
  TS_DISPATCH_FLOAT(out.dtype(), "random", [&] {
    scalar_t* p = out.data<scalar_t>();
    parallel_for(0, out.numel(), 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        p[i] = static_cast<scalar_t>(random_draw::draw(params, params.first + static_cast<uint64_t>(i)));
    });
  });
}

}  // namespace tessera::cpu
