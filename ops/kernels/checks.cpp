#include "tessera/ops/kernels/checks.h"

namespace tessera {

std::string RangeCheck::message(int64_t value, int64_t position) const {
  return detail::concat(subject, " ", value, " at position ", position, " ", condition);
}

}  // namespace tessera
