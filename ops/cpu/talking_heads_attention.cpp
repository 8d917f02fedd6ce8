// CPU kernels of talking_heads_attention (ops/kernels/talking_heads_attention.h; the gradient's
// formulas are in ops/talking_heads_attention.cpp): a tile of query rows at a time, all heads' maps
// of the tile in one [h, rows·N] buffer (a row per head, the tile's rows side by side), so that each
// head mixing is one product w·maps and each per-head product one GEMM on a block of qkv. The tile
// is sized so that the maps stay in the core's cache; the forward runs its (sample, tile) pairs in
// parallel, the backward its samples (a sample's tiles all add into its dk and dv).
// qkv arrives with unit stride along the channels (the front end copies other layouts). qkv, the
// output and their gradients are activations (S); the mixings, lse and the parameters' gradients
// are compute values (as on cuda). bfloat16 activations are converted a sample at a time.
#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Core>

#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/kernels.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/kernels/talking_heads_attention.h"

namespace tessera::cpu {

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Block = Eigen::Map<Mat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using CBlock = Eigen::Map<const Mat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using CVec = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;

// Map values per tile: a few hundred KB of them in float32 (all heads of 20 rows of CaiT's 196 tokens
// at h = 4).
constexpr int64_t kTileValues = 16384;

// The shapes of one call: qkv [B, N, 3·C] with row strides, h heads of dh channels.
struct Dims {
  int64_t B, N, C, H, dh, rows;  // rows: the query rows of a tile
  int64_t sb, sn;                // qkv's strides along B and N
  Dims(const Tensor& qkv, const Tensor& w_l)
      : B(qkv.size(0)),
        N(qkv.size(1)),
        C(qkv.size(2) / 3),
        H(w_l.size(0)),
        dh(C / H),
        rows(std::clamp<int64_t>(kTileValues / (H * N), 1, N)),
        sb(qkv.stride(0)),
        sn(qkv.stride(1)) {}
  int64_t tiles() const { return (N + rows - 1) / rows; }
};

// One sample's N rows of `width` stored values (of qkv, or of the upstream gradient) as compute
// values, row stride ld: in place, or converted whole where S is converted, once for all the
// tiles of the sample that a task visits in a row.
template <class S>
struct SampleRows {
  RunIn<S> in;
  const compute_t<S>* x = nullptr;
  int64_t ld = 0, b = -1;
  void load(const S* base, int64_t sb, int64_t sn, int64_t N, int64_t width, int64_t sample) {
    if (sample == b) return;
    b = sample;
    x = in.matrix(base + sample * sb, N, width, sn);
    ld = RunIn<S>::rows_stride(sn, width);
  }
};

// The d×... blocks of one sample's qkv rows: `count` tokens from `first`, part s (0 q, 1 k, 2 v),
// head hd.
template <class S>
CBlock<compute_t<S>> part(const SampleRows<S>& x, const Dims& d, int64_t first, int64_t count, int64_t s, int64_t hd) {
  return CBlock<compute_t<S>>(x.x + first * x.ld + s * d.C + hd * d.dh, count, d.dh, Eigen::OuterStride<>(x.ld));
}
// Head hd's rows×N block of a [h, rows·N] map buffer.
template <class T>
Block<T> head(Mat<T>& maps, int64_t hd, int64_t rows, int64_t N) {
  return Block<T>(maps.data() + hd * rows * N, rows, N, Eigen::OuterStride<>(N));
}

// The mixings' parameters as Eigen objects (a missing b_w: zeros).
template <class T>
struct Mixings {
  CBlock<T> wl, ww;
  Eigen::Matrix<T, Eigen::Dynamic, 1> bw;
  Mixings(const Tensor& w_l, const Tensor& w_w, const Tensor& b_w, int64_t H)
      : wl(w_l.data<T>(), H, H, Eigen::OuterStride<>(H)),
        ww(w_w.data<T>(), H, H, Eigen::OuterStride<>(H)),
        bw(b_w.defined() ? Eigen::Matrix<T, Eigen::Dynamic, 1>(CVec<T>(b_w.data<T>(), H))
                         : Eigen::Matrix<T, Eigen::Dynamic, 1>::Zero(H)) {}
};

// maps[h, :] ← the scores S_h = scale·q_h·k_hᵀ of `rows` queries from i0, then L = w_l·S into
// `logits` (CaiT §4.3's talking heads: the heads mix before the softmax; b_l, which the softmax
// ignores, is left out).
template <class S, class T = compute_t<S>>
void scores_and_logits(const SampleRows<S>& x, const Dims& d, const Mixings<T>& m, T scale, int64_t i0, int64_t rows,
                       Mat<T>& scores, Mat<T>& logits) {
  for (int64_t hd = 0; hd < d.H; ++hd)
    head(scores, hd, rows, d.N).noalias() =
        scale * (part(x, d, i0, rows, 0, hd) * part(x, d, 0, d.N, 1, hd).transpose());
  logits.noalias() = m.wl * scores;
}

}  // namespace

void talking_heads_attention(const Tensor& qkv, double scale, const Tensor& w_l, const Tensor& w_w, const Tensor& b_w,
                             const Tensor& out, const Tensor& lse) {
  const Dims d(qkv, w_l);
  TS_DISPATCH_STORED(qkv.dtype(), "talking_heads_attention", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S* x = qkv.data<S>();
    S* op = out.data<S>();
    T* lp = lse.data<T>();
    const Mixings<T> m(w_l, w_w, b_w, d.H);
    parallel_for(0, d.B * d.tiles(), 1, [&](int64_t r0, int64_t r1) {
      Mat<T> scores(d.H, d.rows * d.N), maps(d.H, d.rows * d.N);
      SampleRows<S> xs;
      RunOut<S> tile_out;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / d.tiles(), i0 = r % d.tiles() * d.rows, rows = std::min(d.rows, d.N - i0);
        scores.resize(d.H, rows * d.N);
        maps.resize(d.H, rows * d.N);
        xs.load(x, d.sb, d.sn, d.N, 3 * d.C, b);
        scores_and_logits(xs, d, m, static_cast<T>(scale), i0, rows, scores, maps);
        // The softmax of each (head, query) row, its log-sum-exp kept for the backward.
        for (int64_t o = 0; o < d.H; ++o)
          for (int64_t t = 0; t < rows; ++t) {
            auto row = maps.row(o).segment(t * d.N, d.N).array();
            const T mx = row.maxCoeff();
            row = (row - mx).exp();
            const T total = row.sum();
            row /= total;
            lp[(b * d.H + o) * d.N + i0 + t] = mx + std::log(total);
          }
        // A = w_w·P + b_w (the heads mix again after the softmax), then out_g = A_g·v_g.
        scores.noalias() = m.ww * maps;
        scores.colwise() += m.bw;
        T* tile = tile_out(op + (b * d.N + i0) * d.C, rows * d.C);  // the tile's rows of out
        for (int64_t g = 0; g < d.H; ++g)
          Block<T>(tile + g * d.dh, rows, d.dh, Eigen::OuterStride<>(d.C)).noalias() =
              head(scores, g, rows, d.N) * part(xs, d, 0, d.N, 2, g);
        tile_out.done();
      }
    });
  });
}

void talking_heads_attention_backward(const Tensor& g, const Tensor& qkv, double scale, const Tensor& w_l,
                                      const Tensor& w_w, const Tensor& b_w, const Tensor& lse, const Tensor& gqkv,
                                      const Tensor& gparams) {
  const Dims d(qkv, w_l);
  const int64_t H = d.H, hh = H * H;
  // Each sample's parameter gradients in double, added over the samples in order at the end.
  std::vector<double> partial(static_cast<size_t>(d.B * gparams.numel()), 0.0);
  TS_DISPATCH_STORED(qkv.dtype(), "talking_heads_attention_backward", [&] {
    using S = storage_t;
    using T = compute_t<S>;
    const S *x = qkv.data<S>(), *gp = g.data<S>();
    const T* lp = lse.data<T>();
    S* gx = gqkv.data<S>();
    const Mixings<T> m(w_l, w_w, b_w, H);
    const T sc = static_cast<T>(scale);
    const int64_t C3 = 3 * d.C;
    parallel_for(0, d.B, 1, [&](int64_t b0, int64_t b1) {
      Mat<T> scores(H, d.rows * d.N), probs(H, d.rows * d.N), m1(H, d.rows * d.N), m2(H, d.rows * d.N);
      Mat<T> sums(H, 2 * H + 1);  // this tile's dw_l | dw_w | db_w
      SampleRows<S> xs, gs;
      RunOut<S> sample_out;
      for (int64_t b = b0; b < b1; ++b) {
        xs.load(x, d.sb, d.sn, d.N, 3 * d.C, b);
        gs.load(gp, g.stride(0), g.stride(1), d.N, d.C, b);
        // The sample's whole gradient of qkv, in compute values until every tile has added into its
        // dk and dv: stored once, after the last tile.
        T* gxs = sample_out(gx + b * d.N * C3, d.N * C3);
        // Block of the upstream gradient dO_g, of gqkv's part s for head hd.
        auto grad_out = [&](int64_t i0, int64_t rows, int64_t hd) {
          return CBlock<T>(gs.x + i0 * gs.ld + hd * d.dh, rows, d.dh, Eigen::OuterStride<>(gs.ld));
        };
        auto grad_part = [&](int64_t first, int64_t count, int64_t s, int64_t hd) {
          return Block<T>(gxs + first * C3 + s * d.C + hd * d.dh, count, d.dh, Eigen::OuterStride<>(C3));
        };
        Block<T>(gxs + d.C, d.N, 2 * d.C, Eigen::OuterStride<>(C3)).setZero();  // dk, dv
        double* pb = partial.data() + b * gparams.numel();
        for (int64_t i0 = 0; i0 < d.N; i0 += d.rows) {
          const int64_t rows = std::min(d.rows, d.N - i0), n = rows * d.N;
          for (Mat<T>* buffer : {&scores, &probs, &m1, &m2}) buffer->resize(H, n);
          // Recomputed: S, L, P = exp(L − lse) and A = w_w·P + b_w.
          scores_and_logits(xs, d, m, sc, i0, rows, scores, m1);
          for (int64_t o = 0; o < H; ++o)
            for (int64_t t = 0; t < rows; ++t)
              probs.row(o).segment(t * d.N, d.N).array() =
                  (m1.row(o).segment(t * d.N, d.N).array() - lp[(b * H + o) * d.N + i0 + t]).exp();
          m1.noalias() = m.ww * probs;
          m1.colwise() += m.bw;
          for (int64_t hd = 0; hd < H; ++hd) {
            grad_part(0, d.N, 2, hd).noalias() +=
                head(m1, hd, rows, d.N).transpose() * grad_out(i0, rows, hd);  // dv_g += A_gᵀ·dO_g
            head(m2, hd, rows, d.N).noalias() =
                grad_out(i0, rows, hd) * part(xs, d, 0, d.N, 2, hd).transpose();  // dA_g = dO_g·v_gᵀ
          }
          sums.middleCols(H, H).noalias() = m2 * probs.transpose();  // dw_w[g, o] = Σ dA_g ⊙ P_o
          sums.col(2 * H) = m2.rowwise().sum();
          m1.noalias() = m.ww.transpose() * m2;  // dP
          for (int64_t o = 0; o < H; ++o)
            for (int64_t t = 0; t < rows; ++t) {
              auto dp = m1.row(o).segment(t * d.N, d.N).array();
              const auto p = probs.row(o).segment(t * d.N, d.N).array();
              dp = p * (dp - (dp * p).sum());  // dL: the softmax's backward
            }
          sums.leftCols(H).noalias() = m1 * scores.transpose();  // dw_l[o, h] = Σ dL_o ⊙ S_h
          m2.noalias() = m.wl.transpose() * m1;                  // dS
          for (int64_t hd = 0; hd < H; ++hd) {
            grad_part(i0, rows, 0, hd).noalias() = sc * (head(m2, hd, rows, d.N) * part(xs, d, 0, d.N, 1, hd));
            grad_part(0, d.N, 1, hd).noalias() +=
                sc * (head(m2, hd, rows, d.N).transpose() * part(xs, d, i0, rows, 0, hd));
          }
          for (int64_t o = 0; o < H; ++o) {
            for (int64_t k = 0; k < H; ++k) {
              pb[o * H + k] += static_cast<double>(sums(o, k));           // dw_l
              pb[hh + o * H + k] += static_cast<double>(sums(o, H + k));  // dw_w
            }
            pb[2 * hh + o] += static_cast<double>(sums(o, 2 * H));  // db_w
          }
        }
        sample_out.done();
      }
    });
    T* out = gparams.data<T>();
    for (int64_t k = 0; k < gparams.numel(); ++k) {
      double acc = 0;
      for (int64_t b = 0; b < d.B; ++b) acc += partial[static_cast<size_t>(b * gparams.numel() + k)];
      out[k] = static_cast<T>(acc);
    }
  });
}

}  // namespace tessera::cpu
