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

}  // namespace tessera
