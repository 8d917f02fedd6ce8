// main() of the tests of the CPU's own bfloat16 instructions (tests/test_cpu_bf16_native.cpp). On a
// CPU without them (no AVX-512 BF16 or AMX, or the OS does not save their registers) every test
// reports itself skipped — exit code 77, "Not Run (Skipped)" in CTest — with the reason, instead of
// passing: the portable path's tests (tests/test_cpu_bf16.cpp) still run there.
#include <cstdio>
#include <string>

#include "catch_session.h"
#include "tessera/core/cpu_features.h"
#include "tessera/core/levers.h"

int main(int argc, char* argv[]) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  if (!listing && !tessera::cpu_bf16_native()) {
    std::printf("SKIPPED: %s\n", tessera::levers().cpu_bf16_native
                                     ? ("this CPU has no bfloat16 instructions: " + tessera::cpu_description()).c_str()
                                     : "TESSERA_CPU_BF16_NATIVE=0 turns the CPU's bfloat16 instructions off");
    return 77;
  }
  return tessera::testing::run_catch_session(argc, argv);
}
