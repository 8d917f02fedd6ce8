// The online softmax normaliser (internal): a running maximum and a sum of exp(x − maximum) rescaled
// to it (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018), so that one pass
// over the values gives both. Used by softmax's column path (cuda/kernels/softmax.cu);
// factor_attention's kernels (cuda/kernels/factor_attention.cu) rescale their d×d sums the same
// way, tile by tile, beside the columns' maxima and sums.
#pragma once
#include <limits>

#include "tessera/cuda/device_math.h"

namespace tessera::cuda {

// The running (maximum, sum of exp(x − maximum)) of a part of the values, and their merge: one value
// x is merge(x, 1).
template <class T>
struct Normaliser {
  T m = -std::numeric_limits<T>::infinity();
  T s = 0;
  __device__ void merge(T m2, T s2) {
    const T top = dm::max(m, m2);
    if (top == -std::numeric_limits<T>::infinity()) return;  // both empty (or all −inf): nothing to rescale
    s = s * dm::exp(m - top) + s2 * dm::exp(m2 - top);
    m = top;
  }
};

}  // namespace tessera::cuda
