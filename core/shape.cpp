#include "tessera/core/shape.h"

#include <algorithm>

#include "tessera/core/error.h"

namespace tessera {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

std::string shape_str(const Shape& shape) { return detail::concat(shape); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
  TS_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " out of range for a tensor with ", ndim, " dims (expected ", lo,
           "..", hi, ")");
  return dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TS_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast together (dim ", i,
             ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace tessera
