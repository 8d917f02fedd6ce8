// Dense and grouped convolution on the CPU by im2col + GEMM. For image n and group g:
//   cols [Cg·kH·kW, OH·OW] holds the input patch of every output position, and
//   y_ng [Og, OH·OW] = W_g [Og, Cg·kH·kW] · cols                  (forward)
//   dW_g += dy_ng · colsᵀ,  dcols = W_gᵀ · dy_ng -> col2im -> dx    (backward)
// The output positions are processed in blocks whose cols fit in L2, and a 1x1, stride-1,
// unpadded convolution needs no im2col at all (the image is its own cols matrix). bfloat16 cols are
// the input's values moved as they are, and its GEMMs (gemm_bf16) sum in float32 into float32
// blocks: y's block gets the float32 bias there, and dx's image and dW's partial sums stay float32
// until they are complete, so that every output is rounded to bfloat16 once.
#include <utility>
#include <vector>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/conv_common.h"
#include "tessera/ops/cpu/gemm.h"

namespace tessera::cpu::conv {

namespace {

// dst[q] = src[q·stride] for q < n. Stride 2 (the common strided convolution) is spelled with a
// constant stride so that the compiler vectorises it with permutes.
template <class T>
void gather_row(const T* src, int64_t stride, int64_t n, T* dst) {
  if (stride == 1) copy_row(src, n, dst);
  else if (stride == 2)
    for (int64_t q = 0; q < n; ++q) dst[q] = src[2 * q];
  else
    for (int64_t q = 0; q < n; ++q) dst[q] = src[q * stride];
}

// dst[q·stride] += src[q] for q < n (the transpose of gather_row).
template <class T>
void scatter_add_row(const T* src, int64_t n, int64_t stride, T* dst) {
  if (stride == 1) Vec<T>(dst, n) += CVec<T>(src, n);
  else if (stride == 2)
    for (int64_t q = 0; q < n; ++q) dst[2 * q] += src[q];
  else
    for (int64_t q = 0; q < n; ++q) dst[q * stride] += src[q];
}

// Output columns [lo, hi) whose input column ow·stride − pad + tap·dilation lies inside [0, w).
struct Span {
  int64_t lo, hi, offset;  // input column = ow·stride + offset
};
Span valid_span(int64_t tap, int64_t stride, int64_t pad, int64_t dilation, int64_t in, int64_t out) {
  const int64_t offset = tap * dilation - pad;
  // smallest ow with ow·stride + offset >= 0, and one past the largest with ow·stride + offset < in
  const int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t hi = in - offset <= 0 ? 0 : (in - offset - 1) / stride + 1;
  return {std::min(lo, out), std::clamp<int64_t>(hi, 0, out), offset};
}

// Column spans of every horizontal tap (shared by all rows).
std::vector<Span> column_spans(const Geometry& g) {
  std::vector<Span> s(g.kw);
  for (int64_t j = 0; j < g.kw; ++j) s[j] = valid_span(j, g.p.stride[1], g.p.padding[1], g.p.dilation[1], g.w, g.ow);
  return s;
}

// Input row of output row `r` at vertical tap `i`, or -1 when it falls into the padding.
int64_t input_row(const Geometry& g, int64_t r, int64_t i) {
  const int64_t ih = r * g.p.stride[0] - g.p.padding[0] + i * g.p.dilation[0];
  return ih >= 0 && ih < g.h ? ih : -1;
}

// ---- im2col / col2im over a block of output positions -----------------------------------------
//
// One image and group at a time (x_ng is [Cg, H, W]), and only for the output positions
// [l0, l1) of the flattened OH·OW plane: cols is [Cg·kH·kW, l1 − l0]. Working on blocks keeps
// cols small enough to stay in L2 between im2col and the GEMM that reads it.

// Calls seg(r, qa, qb, pos) for every output row r overlapped by positions [l0, l1): its output
// columns [qa, qb), the first of which is block column pos.
template <class F>
void for_each_row_segment(const Geometry& g, int64_t l0, int64_t l1, const F& seg) {
  for (int64_t l = l0; l < l1;) {
    const int64_t r = l / g.ow, qa = l % g.ow, qb = std::min(g.ow, qa + (l1 - l));
    seg(r, qa, qb, l - l0);
    l += qb - qa;
  }
}

// Calls f(row, i, j, c) for every row of cols: input channel c of the group, kernel tap (i, j).
template <class F>
void for_each_cols_row(const Geometry& g, const F& f) {
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) f((c * g.kh + i) * g.kw + j, i, j, c);
}

template <class T>
void im2col(const Geometry& g, const std::vector<Span>& spans, const T* x_ng, int64_t l0, int64_t l1, T* cols) {
  const int64_t sw = g.p.stride[1], width = l1 - l0;
  for_each_cols_row(g, [&](int64_t row, int64_t i, int64_t j, int64_t c) {
    const Span s = spans[j];
    for_each_row_segment(g, l0, l1, [&](int64_t r, int64_t qa, int64_t qb, int64_t pos) {
      T* dst = cols + row * width + pos;  // dst[q - qa] is output column q
      const int64_t ih = input_row(g, r, i);
      // columns [lo, hi) read the image, the rest of [qa, qb) is padding
      const int64_t lo = ih < 0 ? qb : std::clamp(s.lo, qa, qb), hi = ih < 0 ? qb : std::clamp(s.hi, lo, qb);
      std::fill(dst, dst + (lo - qa), T());
      if (hi > lo) gather_row(x_ng + (c * g.h + ih) * g.w + (lo * sw + s.offset), sw, hi - lo, dst + (lo - qa));
      std::fill(dst + (hi - qa), dst + (qb - qa), T());
    });
  });
}

// gx_ng += the scatter of cols back to the input positions they were read from.
template <class T>
void col2im(const Geometry& g, const std::vector<Span>& spans, const T* cols, int64_t l0, int64_t l1, T* gx_ng) {
  const int64_t sw = g.p.stride[1], width = l1 - l0;
  for_each_cols_row(g, [&](int64_t row, int64_t i, int64_t j, int64_t c) {
    const Span s = spans[j];
    for_each_row_segment(g, l0, l1, [&](int64_t r, int64_t qa, int64_t qb, int64_t pos) {
      const int64_t ih = input_row(g, r, i);
      if (ih < 0) return;
      const int64_t lo = std::max(s.lo, qa), hi = std::min(s.hi, qb);
      if (hi > lo)  // from column lo, to its input position
        scatter_add_row(cols + row * width + pos + (lo - qa), hi - lo, sw,
                        gx_ng + (c * g.h + ih) * g.w + (lo * sw + s.offset));
    });
  });
}

// Output positions per block: cols of about kColsBytes (L2-resident), a multiple of 16.
constexpr int64_t kColsBytes = 512 * 1024;
int64_t block_len(const Geometry& g, size_t elem) {
  const int64_t len = static_cast<int64_t>(kColsBytes / elem) / std::max<int64_t>(g.rows(), 1);
  return std::clamp<int64_t>(len / 16 * 16, 16, std::max<int64_t>(g.out_plane(), 1));
}

// Where a GEMM reads the columns of block [l0, l1): the image itself for a pointwise convolution
// (row stride OH·OW = H·W), else the im2col buffer (row stride l1 − l0), filled here.
template <class T>
std::pair<const T*, int64_t> block_cols(const Geometry& g, const std::vector<Span>& spans, const T* x_ng, int64_t l0,
                                        int64_t l1, T* buffer) {
  if (g.pointwise()) return {x_ng + l0, g.out_plane()};
  im2col(g, spans, x_ng, l0, l1, buffer);
  return {buffer, l1 - l0};
}

// Runs body(n0, n1, slot) over the images. When the batch gives every thread an image, the images
// are cut into slots (several per thread, so that a thread that loses its core leaves its slots to
// the others), each with its own workspace, and every GEMM inside runs single-threaded; otherwise
// (e.g. one image) the images run serially in slot 0 and each GEMM uses the threads itself. A slot
// is a fixed range of images, so dW's per-slot sums, and their total, do not depend on which thread
// ran which.
int64_t image_slots(int64_t n) {
  const int64_t threads = get_num_threads();
  return threads > 1 && n >= threads ? std::min(n, threads * detail::kChunksPerThread) : 1;
}

template <class F>
void over_images(int64_t n, const F& body) {
  const int64_t slots = image_slots(n);
  if (slots == 1) {
    body(int64_t{0}, n, int64_t{0});
    return;
  }
  parallel_for(0, slots, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) body(n * s / slots, n * (s + 1) / slots, s);
  });
}

// C = op(A)·op(B) + beta·C with A and B stored as S and C in compute_t<S>: gemm, or for bfloat16
// gemm_bf16's float32 sums into a float32 C.
template <class S>
void gemm_to_compute(const GemmDesc& d, const S* a, const S* b, compute_t<S> beta, compute_t<S>* c) {
  if constexpr (kConverted<S>) gemm_bf16<float>(d, a, b, beta, c);
  else gemm<S>(d, S(1), a, b, beta, c);
}

// C = op(A)·op(B), every operand stored as S (bfloat16: float32 sums, rounded once).
template <class S>
void gemm_to_stored(const GemmDesc& d, const S* a, const S* b, S* c) {
  if constexpr (kConverted<S>) gemm_bf16<BFloat16>(d, a, b, 0.0f, c);
  else gemm<S>(d, S(1), a, b, S(0), c);
}

}  // namespace

// Forward: the (image, block) units are independent (disjoint parts of y), so they are spread
// over the threads whatever the batch size.
template <class S>
void dense_forward(const Geometry& g, const S* x, const S* w, const compute_t<S>* bias, S* y) {
  using T = compute_t<S>;
  const std::vector<Span> spans = column_spans(g);
  const int64_t L = g.out_plane(), R = g.rows(), lb = block_len(g, sizeof(S)), blocks = (L + lb - 1) / lb;
  const int64_t units = g.n * blocks;
  const int64_t grain = g.o * R * L * g.n < (int64_t{1} << 17) ? units : 1;  // tiny: serial
  parallel_for(0, units, grain, [&](int64_t u0, int64_t u1) {
    std::vector<S> buffer(g.pointwise() ? 0 : R * lb);
    std::vector<T> block(kConverted<S> ? g.og * lb : 0);  // bfloat16: the block's outputs in float32
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t n = u / blocks, l0 = u % blocks * lb, l1 = std::min(L, l0 + lb), width = l1 - l0;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        S* y_ng = y + (n * g.o + grp * g.og) * L;
        const auto [cols, ld] = block_cols(g, spans, x + (n * g.c + grp * g.cg) * g.in_plane(), l0, l1, buffer.data());
        T* out;  // the GEMM's output: y itself (row stride L), or the float32 block (row stride width)
        int64_t ldo;
        if constexpr (kConverted<S>) {
          out = block.data();
          ldo = width;
        } else {
          out = y_ng + l0;
          ldo = L;
        }
        T beta = T(0);
        if (bias) {  // rows start as their channel's bias; the GEMM accumulates onto them
          for (int64_t o = 0; o < g.og; ++o) std::fill(out + o * ldo, out + o * ldo + width, bias[grp * g.og + o]);
          beta = T(1);
        }
        const GemmDesc desc{false, false, g.og, width, R, R, ld, ldo};
        gemm_to_compute<S>(desc, w + grp * g.og * R, cols, beta, out);
        if constexpr (kConverted<S>) store_rows(out, ldo, y_ng + l0, L, g.og, width);
      }
    }
  });
}

// Backward: col2im of neighbouring blocks overlaps in dx, so threads take whole images; dW is
// accumulated per thread and summed at the end.
template <class S>
void dense_backward(const Geometry& g, const S* x, const S* w, const S* gy, S* gx, S* gw) {
  using T = compute_t<S>;
  const std::vector<Span> spans = column_spans(g);
  const int64_t L = g.out_plane(), R = g.rows(), wsize = g.o * R, lb = block_len(g, sizeof(S));
  // Each slot accumulates dW of its images privately: slot 0 in gw itself where S is its own
  // compute type; for bfloat16 every slot in float32, their sum rounded into gw once at the end.
  const int64_t slots = image_slots(g.n);
  std::vector<T> partial_gw(gw ? (kConverted<S> ? slots : slots - 1) * wsize : 0, T(0));
  const auto slot_gw = [&](int64_t s) -> T* {
    if (!gw) return nullptr;
    if constexpr (kConverted<S>) return partial_gw.data() + s * wsize;
    else return s == 0 ? gw : partial_gw.data() + (s - 1) * wsize;
  };
  if constexpr (!kConverted<S>)
    if (gw) std::fill(gw, gw + wsize, T(0));
  const bool scatter = gx && !g.pointwise();  // dx through col2im
  over_images(g.n, [&](int64_t n0, int64_t n1, int64_t slot) {
    std::vector<S> cols(gw && !g.pointwise() ? R * lb : 0);
    std::vector<T> dcols(scatter ? R * lb : 0);
    std::vector<T> image(kConverted<S> && scatter ? g.cg * g.in_plane() : 0);  // bfloat16: dx_ng in float32
    T* gw_slot = slot_gw(slot);
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const int64_t x_off = (n * g.c + grp * g.cg) * g.in_plane();
        const S* gy_ng = gy + (n * g.o + grp * g.og) * L;
        const S* w_g = w + grp * g.og * R;
        T* gx_ng = nullptr;  // where col2im sums dx_ng
        if (scatter) {
          if constexpr (kConverted<S>) gx_ng = image.data();
          else gx_ng = gx + x_off;
          std::fill(gx_ng, gx_ng + g.cg * g.in_plane(), T(0));
        }
        for (int64_t l0 = 0; l0 < L; l0 += lb) {
          const int64_t l1 = std::min(L, l0 + lb), width = l1 - l0;
          if (gw) {  // dW_g += dy_ng[:, block] · colsᵀ
            const auto [c, ld] = block_cols(g, spans, x + x_off, l0, l1, cols.data());
            const GemmDesc desc{false, true, g.og, R, width, L, ld, R};
            gemm_to_compute<S>(desc, gy_ng + l0, c, T(1), gw_slot + grp * g.og * R);
          }
          if (gx) {  // dcols = W_gᵀ · dy_ng[:, block], then col2im (pointwise: dcols is dx itself)
            const GemmDesc desc{true, false, R, width, g.og, R, L, g.pointwise() ? L : width};
            if (g.pointwise()) {
              gemm_to_stored<S>(desc, w_g, gy_ng + l0, gx + x_off + l0);
            } else {
              gemm_to_compute<S>(desc, w_g, gy_ng + l0, T(0), dcols.data());
              col2im(g, spans, dcols.data(), l0, l1, gx_ng);
            }
          }
        }
        if constexpr (kConverted<S>)
          if (scatter) store_run(gx_ng, gx + x_off, g.cg * g.in_plane());
      }
  });
  if (!gw) return;
  T* total = slot_gw(0);
  for (int64_t s = 1; s < slots; ++s) {
    const T* part = slot_gw(s);
    for (int64_t i = 0; i < wsize; ++i) total[i] += part[i];
  }
  if constexpr (kConverted<S>) store_run(total, gw, wsize);
}

template void dense_forward<float>(const Geometry&, const float*, const float*, const float*, float*);
template void dense_forward<double>(const Geometry&, const double*, const double*, const double*, double*);
template void dense_forward<BFloat16>(const Geometry&, const BFloat16*, const BFloat16*, const float*, BFloat16*);
template void dense_backward<float>(const Geometry&, const float*, const float*, const float*, float*, float*);
template void dense_backward<double>(const Geometry&, const double*, const double*, const double*, double*, double*);
template void dense_backward<BFloat16>(const Geometry&, const BFloat16*, const BFloat16*, const BFloat16*, BFloat16*,
                                       BFloat16*);

}  // namespace tessera::cpu::conv
