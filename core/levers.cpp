#include "tessera/core/levers.h"

#include <cstdlib>
#include <cstring>

namespace tessera {

Levers& levers() {
  static Levers read = [] {
    Levers l;
#define TS_LEVER_READ(field, variable, on, what) \
  if (const char* v = std::getenv(variable)) l.field = on ? std::strcmp(v, "0") != 0 : std::strcmp(v, "1") == 0;
    TESSERA_LEVERS(TS_LEVER_READ)
#undef TS_LEVER_READ
    return l;
  }();
  return read;
}

const std::vector<LeverInfo>& lever_table() {
  static const std::vector<LeverInfo> table{
#define TS_LEVER_ROW(field, variable, on, what) {variable, on, what, &Levers::field},
      TESSERA_LEVERS(TS_LEVER_ROW)
#undef TS_LEVER_ROW
  };
  return table;
}

}  // namespace tessera
