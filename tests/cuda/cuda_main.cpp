// main() of the `cuda` tests. Where the CUDA backend is built but no device is usable (the real
// CUDA build on a machine without a GPU), every test reports itself skipped — exit code 77, which
// CTest shows as "Not Run (Skipped)" — with the reason, instead of passing.
#include <cstdio>
#include <string>

#include "catch_session.h"
#include "tessera/core/backend.h"

int main(int argc, char* argv[]) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  if (!listing && tessera::device_count(tessera::DeviceType::CUDA) == 0) {
    std::printf("SKIPPED: no usable CUDA device: %s\n", tessera::unavailable_reason(tessera::Device::cuda(0)).c_str());
    return 77;
  }
  return tessera::testing::run_catch_session(argc, argv);
}
