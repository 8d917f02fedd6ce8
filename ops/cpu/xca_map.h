// XCA's map on one d×d matrix (internal): the arithmetic of xca_attention_map's CPU kernels
// (ops/kernels/xca_attention_map.h gives the formulas), which run it per matrix of a batch, and of
// xca_attention's, which run it per (sample, head) between the token products. It works on compute
// values: the kernels convert a bfloat16 matrix to float32 before it and after.
#pragma once
#include <algorithm>
#include <cstdint>

#include <Eigen/Core>

#include "tessera/ops/cpu/rows.h"

namespace tessera::cpu {

// Per-task scratch of the map's two passes, for matrices of d×d.
template <class T>
struct XcaMapScratch {
  explicit XcaMapScratch(int64_t d) : inv_k(d), gz(d), c(d), cols(d) {}
  Eigen::Array<T, Eigen::Dynamic, 1> inv_k, gz, c;
  Eigen::ArrayXd cols;  // the backward's column sums, in double so the order of the rows matters less
};

// a = softmax over each row of temp·s/(q̄ k̄ᵀ), q̄ = max(nq, eps), k̄ = max(nk, eps) (XCiT Eq. 3);
// s and a are d×d row-major, nq and nk d-vectors.
template <class T>
void xca_map_matrix(const T* s, const T* nq, const T* nk, T temp, T eps, int64_t d, T* a, XcaMapScratch<T>& w) {
  for (int64_t j = 0; j < d; ++j) w.inv_k[j] = T(1) / std::max(nk[j], eps);
  for (int64_t i = 0; i < d; ++i) {
    const T scale = temp / std::max(nq[i], eps);
    Row<T> z(a + i * d, d);
    z = (CRow<T>(s + i * d, d) * w.inv_k) * scale;
    z = (z - z.maxCoeff()).exp();
    z *= T(1) / z.sum();
  }
}

// The map's backward on one matrix, from ga = ∂L/∂a: gs (d×d), the row terms and the norms'
// coefficients q_coef and k_coef (d each), as ops/kernels/xca_attention_map.h defines them.
template <class T>
void xca_map_backward_matrix(const T* ga, const T* a, const T* s, const T* nq, const T* nk, T temp, T eps, int64_t d,
                             T* gs, T* row_terms, T* q_coef, T* k_coef, XcaMapScratch<T>& w) {
  // −t·term/n̄² where the norm reaches eps, else 0 (the clamp's gradient).
  const auto coef = [eps, temp](T term, T norm) {
    const T clamped = std::max(norm, eps);
    return norm >= eps ? -temp * term / (clamped * clamped) : T(0);
  };
  for (int64_t j = 0; j < d; ++j) w.inv_k[j] = T(1) / std::max(nk[j], eps);
  w.cols.setZero();
  for (int64_t i = 0; i < d; ++i) {
    const CRow<T> ai(a + i * d, d), gai(ga + i * d, d);
    const T q_bar = std::max(nq[i], eps);
    w.gz = ai * (gai - (gai * ai).sum());
    w.c = CRow<T>(s + i * d, d) * w.inv_k / q_bar;
    Row<T>(gs + i * d, d) = w.gz * temp * w.inv_k / q_bar;
    row_terms[i] = (w.gz * w.c).sum();
    q_coef[i] = coef(row_terms[i], nq[i]);
    w.cols += (w.gz * w.c).template cast<double>();
  }
  for (int64_t j = 0; j < d; ++j) k_coef[j] = coef(static_cast<T>(w.cols[j]), nk[j]);
}

}  // namespace tessera::cpu
