// Rows in the CPU kernels (internal): Eigen maps of one contiguous row (those of
// layer_scale_residual, linear_gelu, XCA's map (ops/cpu/xca_map.h) and interpolate), and the
// parallel grain for rows of a given length (those of factor_attention_merge, class_attention,
// xca_attention and xnorm_matmul).
#pragma once
#include <algorithm>
#include <cstdint>

#include <Eigen/Core>

namespace tessera::cpu {

template <class T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Rows of work per parallel_for chunk for rows of `per_row` elements: about 4096 elements a chunk.
inline int64_t grain_for(int64_t per_row) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(1, per_row)); }

}  // namespace tessera::cpu
