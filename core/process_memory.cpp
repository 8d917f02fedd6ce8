// Reads VmRSS / VmHWM from /proc/self/status; see core/process_memory.h.
#include "tessera/core/process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace tessera {

namespace {
int64_t status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(field.size() + 1));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;  // not Linux: unknown
}
}  // namespace

int64_t resident_bytes() { return status_kib("VmRSS"); }
int64_t peak_resident_bytes() { return status_kib("VmHWM"); }

}  // namespace tessera
