// Runs a contiguous-span function over strided operands (internal). Kernels written for
// contiguous spans (vectorised by Eigen) get strided and broadcast inputs for free: rows that are
// not unit-stride are gathered into small per-thread buffers first, and so are the rows of a
// stored type that computes in another (bfloat16: ops/cpu/storage.h), converted on the way in and
// out.
#pragma once
#include <array>

#include "tessera/ops/cpu/loop.h"
#include "tessera/ops/cpu/storage.h"

namespace tessera::cpu {

// fn(const std::array<const T*, NIN>& in, T* out, int64_t n) on contiguous spans of T =
// compute_t<S>, for operands stored as S; `out` must have `shape`, every input is a tensor of
// `shape` (possibly a stride-0 expanded view).
template <class S, size_t NIN, class Fn>
void map_spans(const Tensor& out, const std::array<const Tensor*, NIN>& in, const Fn& fn) {
  using T = compute_t<S>;
  std::array<const Tensor*, NIN + 1> all;
  all[0] = &out;
  for (size_t k = 0; k < NIN; ++k) all[k + 1] = in[k];
  auto plan = make_plan<NIN + 1>(out.shape(), all);
  constexpr int64_t kChunk = 1024;
  for_each_row(plan, [&](std::array<char*, NIN + 1> p, const std::array<int64_t, NIN + 1>& st, int64_t n) {
    // In place: every operand of the row has unit stride, and S is its own compute type.
    const auto in_place = [&](size_t k) { return !kConverted<S> && st[k] == 1; };
    bool all_in_place = true;
    for (size_t k = 0; k <= NIN; ++k) all_in_place = all_in_place && in_place(k);
    if (all_in_place) {
      std::array<const T*, NIN> ins;
      for (size_t k = 0; k < NIN; ++k) ins[k] = reinterpret_cast<const T*>(p[k + 1]);
      fn(ins, reinterpret_cast<T*>(p[0]), n);
      return;
    }
    thread_local RunBuffer<S> buffer;
    T* scratch = buffer.get(kChunk * (NIN + 1));
    for (int64_t s = 0; s < n; s += kChunk) {
      const int64_t m = std::min(kChunk, n - s);
      std::array<const T*, NIN> ins;
      for (size_t k = 0; k < NIN; ++k) {
        const S* src = reinterpret_cast<const S*>(p[k + 1]) + s * st[k + 1];
        if (in_place(k + 1)) {
          ins[k] = reinterpret_cast<const T*>(src);
          continue;
        }
        T* buf = scratch + kChunk * (k + 1);
        load_strided(src, st[k + 1], buf, m);
        ins[k] = buf;
      }
      S* dst = reinterpret_cast<S*>(p[0]) + s * st[0];
      T* o = in_place(0) ? reinterpret_cast<T*>(dst) : scratch;
      fn(ins, o, m);
      if (!in_place(0)) store_strided(o, dst, st[0], m);
    }
  });
}

}  // namespace tessera::cpu
