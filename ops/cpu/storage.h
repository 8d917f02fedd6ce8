// Storage types of the CPU kernels (internal). Each kernel is written once, as a template on the
// type S its activations are stored in, and computes in compute_t<S>: float32 and float64 in
// themselves, bfloat16 (autocast's low-precision activations, core/autocast.h) in float32, as the
// cuda kernels do (cuda/dispatch.h). Per-channel parameters and statistics beside bfloat16
// activations are float32 tensors (core/dtype.h accumulate_dtype), read as compute_t<S>.
//
// A kernel moves stored values to compute values one contiguous run at a time (a row of a norm, a
// chunk of an element-wise op, a head's slice of an attention): RunIn reads a run, RunOut takes one
// to write. Where S is its own compute type both hand out the stored values themselves — no copy,
// the code the float32 kernels always ran — and for bfloat16 they convert through a buffer the size
// of one run (ops/cpu/bf16_runs.h: rounded to nearest even, as on cuda), so that a bfloat16 kernel
// moves half the bytes of the float32 one and never a whole tensor in float32.
//
//   TS_DISPATCH_STORED(x.dtype(), "layer_norm", [&] {
//     using S = storage_t;
//     using T = compute_t<S>;
//     RunIn<S> in;
//     RunOut<S> out;
//     for (each row r) {
//       const T* xr = in(xp + r * C, C);
//       T* yr = out(yp + r * C, C);
//       ... compute yr from xr ...
//       out.done();
//     }
//   });
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/half.h"
#include "tessera/ops/cpu/bf16_runs.h"

namespace tessera::cpu {

template <class S>
struct ComputeType {
  using type = S;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
template <class S>
using compute_t = typename ComputeType<S>::type;

// Whether S is converted to be computed on (bfloat16) rather than read in place.
template <class S>
inline constexpr bool kConverted = !std::is_same_v<S, compute_t<S>>;

// One value: stored -> compute, and compute -> stored (rounded to nearest even).
template <class S>
compute_t<S> value(S v) {
  if constexpr (kConverted<S>) return bf16_bits_to_float(v.bits);
  else return v;
}
template <class S>
S stored(compute_t<S> v) {
  if constexpr (kConverted<S>) {
    S s;
    s.bits = float_to_bf16_bits(v);
    return s;
  } else {
    return v;
  }
}

template <class S>
void load_run(const S* src, compute_t<S>* dst, int64_t n) {
  if constexpr (kConverted<S>) bf16_to_float(src, dst, n);
  else std::copy(src, src + n, dst);
}

template <class S>
void store_run(const compute_t<S>* src, S* dst, int64_t n) {
  if constexpr (kConverted<S>) float_to_bf16(src, dst, n);
  else if (src != dst) std::copy(src, src + n, dst);
}

// rows runs of cols values, row strides in elements (one conversion call for all of them).
template <class S>
void load_rows(const S* src, int64_t src_ld, compute_t<S>* dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  if constexpr (kConverted<S>) bf16_to_float(src, src_ld, dst, dst_ld, rows, cols);
  else
    for (int64_t r = 0; r < rows; ++r) std::copy(src + r * src_ld, src + r * src_ld + cols, dst + r * dst_ld);
}

template <class S>
void store_rows(const compute_t<S>* src, int64_t src_ld, S* dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  if constexpr (kConverted<S>) float_to_bf16(src, src_ld, dst, dst_ld, rows, cols);
  else
    for (int64_t r = 0; r < rows; ++r)
      if (src + r * src_ld != dst + r * dst_ld) std::copy(src + r * src_ld, src + r * src_ld + cols, dst + r * dst_ld);
}

// Rounds compute values in place to what storing them as S and reading them back gives (a no-op
// where S is its own compute type): for a result that the float32 kernels keep in the output's
// storage and read again (linear_gelu's h), so that a bfloat16 kernel computes on the same bits.
template <class S>
void round_to_storage(compute_t<S>* values, int64_t n) {
  if constexpr (kConverted<S>) round_floats_to_bf16(values, n);
}

// n values `stride` apart, gathered into a dense run (and scattered back).
template <class S>
void load_strided(const S* src, int64_t stride, compute_t<S>* dst, int64_t n) {
  if (stride == 1) return load_run(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = value(src[i * stride]);
}
template <class S>
void store_strided(const compute_t<S>* src, S* dst, int64_t stride, int64_t n) {
  if (stride == 1) return store_run(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i * stride] = stored<S>(src[i]);
}

// A buffer of compute values, grown on demand and kept between runs, aligned as the tensors'
// storage is (core/storage.cpp).
template <class S>
class RunBuffer {
 public:
  compute_t<S>* get(int64_t n) {
    if (capacity_ < n) {
      values_.reset(static_cast<compute_t<S>*>(
          ::operator new[](static_cast<size_t>(n) * sizeof(compute_t<S>), std::align_val_t{kAlignment})));
      capacity_ = n;
    }
    return values_.get();
  }

 private:
  // A cache line, which is also an AVX-512 vector: Eigen's vectorised loops over a run start with
  // scalar steps up to the first aligned element, a dozen of them per reduction of a short row
  // from a malloc'ed (16-byte aligned) buffer.
  static constexpr size_t kAlignment = 64;
  struct Free {
    void operator()(compute_t<S>* p) const { ::operator delete[](p, std::align_val_t{kAlignment}); }
  };
  std::unique_ptr<compute_t<S>[], Free> values_;
  int64_t capacity_ = 0;
};

// Rows [r0, r1) of `cols` values each, in blocks of about kRowBlockValues values: fn(first, count)
// for each block. A row kernel reads and writes a block's rows as one run, so that bfloat16 storage
// is converted one call per block (16 KB of float32) rather than one per row of a few hundred values,
// where the calls would cost as much as the conversions.
inline constexpr int64_t kRowBlockValues = 4096;
template <class F>
void for_row_blocks(int64_t r0, int64_t r1, int64_t cols, const F& fn) {
  const int64_t step = std::max<int64_t>(1, kRowBlockValues / std::max<int64_t>(cols, 1));
  for (int64_t r = r0; r < r1; r += step) fn(r, std::min(step, r1 - r));
}

// Reads a run of stored values as compute values: in place, or converted into this reader's
// buffer (valid until its next call).
template <class S>
class RunIn {
 public:
  using T = compute_t<S>;
  const T* operator()(const S* src, int64_t n) {
    if constexpr (!kConverted<S>) return src;
    T* dst = buffer_.get(n);
    load_run(src, dst, n);
    return dst;
  }
  // rows × cols values with row stride ld (unit stride along a row), as a dense rows × cols run
  // where converted; in place (row stride ld) otherwise. The row stride of the result is
  // rows_stride(ld, cols).
  const T* matrix(const S* src, int64_t rows, int64_t cols, int64_t ld) {
    if constexpr (!kConverted<S>) return src;
    T* dst = buffer_.get(rows * cols);
    load_rows(src, ld, dst, cols, rows, cols);
    return dst;
  }
  static constexpr int64_t rows_stride(int64_t ld, int64_t cols) { return kConverted<S> ? cols : ld; }
  // n values `stride` apart, dense where converted or strided; in place when stride is 1 and S
  // is its compute type.
  const T* strided(const S* src, int64_t stride, int64_t n) {
    if constexpr (!kConverted<S>)
      if (stride == 1) return src;
    T* dst = buffer_.get(n);
    load_strided(src, stride, dst, n);
    return dst;
  }

 private:
  RunBuffer<S> buffer_;
};

// A run to write: the kernel computes into what operator() (or update(), which first reads the
// stored values, for +=) returns, and done() stores it.
template <class S>
class RunOut {
 public:
  using T = compute_t<S>;
  T* operator()(S* dst, int64_t n) { return begin(dst, 1, n, n, n, false); }
  T* update(S* dst, int64_t n) { return begin(dst, 1, n, n, n, true); }
  // rows × cols values with row stride ld, computed with row stride RunIn<S>::rows_stride(ld, cols).
  T* matrix(S* dst, int64_t rows, int64_t cols, int64_t ld, bool read = false) {
    return begin(dst, rows, cols, ld, rows * cols, read);
  }
  void done() {
    if constexpr (kConverted<S>) store_rows(values_, cols_, dst_, ld_, rows_, cols_);
  }

 private:
  T* begin(S* dst, int64_t rows, int64_t cols, int64_t ld, int64_t count, bool read) {
    if constexpr (!kConverted<S>) return dst;
    dst_ = dst;
    rows_ = rows;
    cols_ = cols;
    ld_ = ld;
    values_ = buffer_.get(count);
    if (read) load_rows(dst, ld, values_, cols, rows, cols);
    return values_;
  }

  RunBuffer<S> buffer_;
  S* dst_ = nullptr;
  T* values_ = nullptr;
  int64_t rows_ = 0, cols_ = 0, ld_ = 0;
};

}  // namespace tessera::cpu

// Runs the lambda-like __VA_ARGS__ with `storage_t` bound to the C++ type of a float32, float64 or
// bfloat16 dtype (compute in compute_t<storage_t>); any other dtype is an error naming the op.
// float16 computes on cuda only: the CPU has no float16 arithmetic worth its conversions
// (core/autocast.h).
#define TS_DISPATCH_STORED(DT, OP, ...)                                                                           \
  [&] {                                                                                                           \
    switch (DT) {                                                                                                 \
      case ::tessera::DType::Float32: {                                                                           \
        using storage_t = float;                                                                                  \
        return __VA_ARGS__();                                                                                     \
      }                                                                                                           \
      case ::tessera::DType::Float64: {                                                                           \
        using storage_t = double;                                                                                 \
        return __VA_ARGS__();                                                                                     \
      }                                                                                                           \
      case ::tessera::DType::BFloat16: {                                                                          \
        using storage_t = ::tessera::BFloat16;                                                                    \
        return __VA_ARGS__();                                                                                     \
      }                                                                                                           \
      default:                                                                                                    \
        throw ::tessera::Error(::tessera::detail::concat(OP, ": dtype ", ::tessera::dtype_name(DT),               \
                                                         " is not supported on the CPU (expected float32, "       \
                                                         "float64 or bfloat16; float16 computes on cuda only)")); \
    }                                                                                                             \
  }()

// As TS_DISPATCH_STORED, plus int64 and bool (which compute in themselves): for ops that also
// make sense on indices, labels and masks (comparisons, where).
#define TS_DISPATCH_STORED_ALL(DT, OP, ...)                    \
  [&] {                                                        \
    switch (DT) {                                              \
      case ::tessera::DType::Int64: {                          \
        using storage_t = int64_t;                             \
        return __VA_ARGS__();                                  \
      }                                                        \
      case ::tessera::DType::Bool: {                           \
        using storage_t = bool;                                \
        return __VA_ARGS__();                                  \
      }                                                        \
      default: return TS_DISPATCH_STORED(DT, OP, __VA_ARGS__); \
    }                                                          \
  }()
