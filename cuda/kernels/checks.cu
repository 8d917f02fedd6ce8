// CUDA kernel of the data-dependent checks (ops/kernels/checks.h): a thread that finds a value
// outside [0, limit) claims the device's check record and writes what it found; the host reports
// it at the next synchronisation (cuda/checks.cpp). Nothing here stops the host.
#include "tessera/cuda/device.h"
#include "tessera/cuda/grid.h"
#include "tessera/cuda/kernels.h"
#include "tessera/cuda/strided.h"
#include "tessera/ops/kernels/checks.h"

namespace tessera::cuda {

namespace {

__global__ void check_range_elements(StridedOffsets<1> layout, int64_t n, const int64_t* values, int64_t limit,
                                     int check, CheckRecord* record) {
  TS_GRID_STRIDE_LOOP(i, n) {
    int64_t off[1];
    layout.offsets(i, off);
    const int64_t v = values[off[0]];
    if ((v < 0 || v >= limit) && atomicCAS(&record->claimed, 0u, 1u) == 0u) {
      record->check = check;
      record->value = v;
      record->position = i;
    }
  }
}

}  // namespace

void check_range(const Tensor& values, int64_t limit, const RangeCheck& check) {
  const int64_t n = values.numel();
  if (n == 0) return;
  KernelContext ctx(values);
  int id = 0;
  CheckRecord* record = begin_check(values.device().index, check, id);
  const auto layout = strided_offsets<1>(values.shape(), {&values}, "check_range");
  launch("check_range", check_range_elements, blocks_for(n), kBlockThreads, 0, ctx.stream, layout, n,
         values.device_data<int64_t>(), limit, id, record);
}

}  // namespace tessera::cuda
