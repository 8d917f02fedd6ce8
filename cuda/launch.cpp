#include "tessera/cuda/launch.h"

#include <cstdlib>
#include <string>

namespace tessera::cuda {

bool synchronous_launches() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_CUDA_SYNC");
    return v && std::string(v) == "1";
  }();
  return on;
}

}  // namespace tessera::cuda
