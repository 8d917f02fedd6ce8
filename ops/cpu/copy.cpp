// CPU kernels of the copy family: strided copy with dtype conversion (ops/kernels/convert.h), fill.
// Contiguous runs between float32 and bfloat16 (autocast's casts of weights and activations)
// convert with the vectorised conversions of ops/cpu/bf16_runs.h, to the same bits.
#include <cstring>

#include "tessera/ops/cpu/bf16_runs.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/loop.h"
#include "tessera/ops/kernels/convert.h"

namespace tessera::cpu {

using convert::convert;
using convert::from_double;
using convert::visit_dtype;

void copy(const Tensor& src, const Tensor& dst) {
  auto plan = cpu::make_plan<2>(dst.shape(), {&dst, &src});
  visit_dtype(src.dtype(), [&](auto s_tag) {
    visit_dtype(dst.dtype(), [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      cpu::for_each_row(plan, [&](std::array<char*, 2> p, const std::array<int64_t, 2>& st, int64_t n) {
        D* d = reinterpret_cast<D*>(p[0]);
        const S* s = reinterpret_cast<const S*>(p[1]);
        if (st[0] == 1 && st[1] == 1) {
          if constexpr (std::is_same_v<S, D>) return static_cast<void>(std::memcpy(d, s, n * sizeof(D)));
          if constexpr (std::is_same_v<S, float> && std::is_same_v<D, BFloat16>) return float_to_bf16(s, d, n);
          if constexpr (std::is_same_v<S, BFloat16> && std::is_same_v<D, float>) return bf16_to_float(s, d, n);
        }
        for (int64_t i = 0; i < n; ++i) d[i * st[0]] = convert<S, D>(s[i * st[1]]);
      });
    });
  });
}

void cat(const std::vector<Tensor>& pieces, const Shape& sizes, int64_t dim, const Tensor& out) {
  // A copy or a fill per piece: on the CPU they cost no launch, and each is vectorised.
  int64_t offset = 0;
  for (size_t i = 0; i < pieces.size(); offset += sizes[i], ++i) {
    if (sizes[i] == 0) continue;
    const Tensor part = out.narrow(dim, offset, sizes[i]);
    if (pieces[i].defined()) copy(pieces[i], part);
    else fill(part, 0.0);
  }
}

void cast_all(const std::vector<Tensor>& srcs, const std::vector<Tensor>& dsts) {
  for (size_t i = 0; i < srcs.size(); ++i) copy(srcs[i], dsts[i]);
}

void fill(const Tensor& dst, double value) {
  auto plan = cpu::make_plan<1>(dst.shape(), {&dst});
  visit_dtype(dst.dtype(), [&](auto tag) {
    using D = decltype(tag);
    const D v = from_double<D>(value);
    cpu::for_each_row(plan, [&](std::array<char*, 1> p, const std::array<int64_t, 1>& st, int64_t n) {
      D* d = reinterpret_cast<D*>(p[0]);
      for (int64_t i = 0; i < n; ++i) d[i * st[0]] = v;
    });
  });
}

void embed(const Tensor& src, const Tensor& out, const Shape& start, const Shape& step, double value) {
  // Two passes: on the CPU a fill and a strided copy cost no launch, and each is vectorised.
  fill(out, value);
  Tensor inside = out;
  for (int64_t d = 0; d < out.dim(); ++d)
    inside = inside.slice(d, start[d], start[d] + (src.size(d) - 1) * step[d] + 1, step[d]);
  if (src.numel() > 0) copy(src, inside);
}

}  // namespace tessera::cpu
