// CUDA kernel of random tensor creation: element i is the shared Philox draw of counter first + i
// (ops/kernels/random.h), so a seed gives the CPU's values (uniforms bit for bit).
#include "tessera/cuda/device.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/ops/kernels/random.h"

namespace tessera::cuda {

namespace {

template <class T>
__global__ void random_elements(RandomParams captured, int64_t n, T* out) {
  const RandomParams params = random_draw::resolve_stream(captured);
  TS_GRID_STRIDE_LOOP(i, n) {
    out[i] = static_cast<T>(random_draw::draw(params, params.first + static_cast<uint64_t>(i)));
  }
}

}  // namespace

void random(const RandomParams& params, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  KernelContext ctx(out);
  TS_DISPATCH_FLOAT(out.dtype(), "random", [&] {
    launch("random", random_elements<scalar_t>, blocks_for(n), kBlockThreads, 0, ctx.stream, params, n,
           out.device_data<scalar_t>());
  });
}

}  // namespace tessera::cuda
