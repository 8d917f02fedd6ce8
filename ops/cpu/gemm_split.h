// How a batch of GEMMs is cut into the units the compute pool's threads claim (internal to the CPU
// GEMMs, gemm.cpp and gemm_bf16.cpp). Every unit is one single-threaded product: a library's own
// threading (oneDNN's is OpenMP's) would bring back the barrier that waits for a descheduled
// thread (core/parallel.h). A batch that gives every thread several entries is split by entries;
// otherwise each GEMM's C is also cut into panels of its longer side (rows only, where asked),
// several per thread, so that a thread that loses its core leaves its panels to the others.
#pragma once
#include <algorithm>
#include <cstdint>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/gemm.h"

namespace tessera::cpu {

struct GemmSplit {
  // Panels start on multiples of kAlign (a multiple of the micro-kernels' tiles) and are at least
  // kMinPanel wide, and hold at least kMinMacs multiply-adds (below that a call's fixed cost shows).
  static constexpr int64_t kAlign = 16, kMinPanel = 32, kMinMacs = int64_t{1} << 16;

  bool rows = true;    // panels of C's rows, else of its columns
  int64_t length = 0;  // the dimension cut: m or n
  int64_t panels = 1;  // per GEMM

  GemmSplit(const GemmDesc& d, int64_t batch, bool rows_only) {
    rows = rows_only || d.m >= d.n;
    length = rows ? d.m : d.n;
    const int64_t threads = in_parallel_region() ? 1 : get_num_threads();
    const int64_t wanted = threads * detail::kChunksPerThread;
    if (threads <= 1 || batch >= wanted) return;
    const int64_t macs = d.m * d.n * std::max<int64_t>(d.k, 1);
    panels = std::clamp<int64_t>((wanted + batch - 1) / batch, 1,
                                 std::max<int64_t>(1, std::min(length / kMinPanel, macs / kMinMacs)));
  }

  // Where panel q starts (aligned, monotone, the last ending at `length`).
  int64_t edge(int64_t q) const {
    if (q >= panels) return length;
    const int64_t raw = length * q / panels;
    return std::min(length, (raw + kAlign / 2) / kAlign * kAlign);
  }

  // Panel q of one GEMM: its shape and where its operands and result start (element offsets).
  struct Panel {
    GemmDesc d;
    int64_t a, b, c;  // offsets into A, B and C
    int64_t first;    // its first row (rows) or column of C
  };
  Panel panel(const GemmDesc& d, int64_t q) const {
    const int64_t lo = edge(q), hi = edge(q + 1);
    Panel p{d, 0, 0, 0, lo};
    if (rows) {
      p.d.m = hi - lo;
      p.a = d.trans_a ? lo : lo * d.lda;  // op(A)'s rows: A's rows, or its columns when transposed
      p.c = lo * d.ldc;
    } else {
      p.d.n = hi - lo;
      p.b = d.trans_b ? lo * d.ldb : lo;  // op(B)'s columns: B's columns, or its rows when transposed
      p.c = lo;
    }
    return p;
  }
};

}  // namespace tessera::cpu
