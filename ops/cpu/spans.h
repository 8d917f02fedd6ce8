// Runs a contiguous-span function over strided operands (internal). Kernels written for
// contiguous spans (vectorised by Eigen) get strided and broadcast inputs for free: rows that are
// not unit-stride are gathered into small per-thread buffers first.
#pragma once
#include <array>
#include <vector>

#include "tessera/ops/cpu/loop.h"

namespace tessera::cpu {

// fn(const std::array<const T*, NIN>& in, T* out, int64_t n) on contiguous spans; `out` must have
// `shape`, every input is a tensor of `shape` (possibly a stride-0 expanded view).
template <class T, size_t NIN, class Fn>
void map_spans(const Tensor& out, const std::array<const Tensor*, NIN>& in, const Fn& fn) {
  std::array<const Tensor*, NIN + 1> all;
  all[0] = &out;
  for (size_t k = 0; k < NIN; ++k) all[k + 1] = in[k];
  auto plan = make_plan<NIN + 1>(out.shape(), all);
  constexpr int64_t kChunk = 1024;
  for_each_row(plan, [&](std::array<char*, NIN + 1> p, const std::array<int64_t, NIN + 1>& st, int64_t n) {
    bool unit = true;
    for (size_t k = 0; k <= NIN; ++k) unit = unit && st[k] == 1;
    if (unit) {
      std::array<const T*, NIN> ins;
      for (size_t k = 0; k < NIN; ++k) ins[k] = reinterpret_cast<const T*>(p[k + 1]);
      fn(ins, reinterpret_cast<T*>(p[0]), n);
      return;
    }
    thread_local std::vector<T> scratch;
    scratch.resize(kChunk * (NIN + 1));
    for (int64_t s = 0; s < n; s += kChunk) {
      const int64_t m = std::min(kChunk, n - s);
      std::array<const T*, NIN> ins;
      for (size_t k = 0; k < NIN; ++k) {
        const T* src = reinterpret_cast<const T*>(p[k + 1]) + s * st[k + 1];
        if (st[k + 1] == 1) {
          ins[k] = src;
          continue;
        }
        T* buf = scratch.data() + kChunk * (k + 1);
        for (int64_t i = 0; i < m; ++i) buf[i] = src[i * st[k + 1]];
        ins[k] = buf;
      }
      T* dst = reinterpret_cast<T*>(p[0]) + s * st[0];
      T* o = st[0] == 1 ? dst : scratch.data();
      fn(ins, o, m);
      if (st[0] != 1)
        for (int64_t i = 0; i < m; ++i) dst[i * st[0]] = o[i];
    }
  });
}

}  // namespace tessera::cpu
