// Catch2's implementation, compiled once for every test program: the default main() (catch_main.cpp)
// and the mains of the `cuda` and `mpi` tests, which add their own set-up, all run it through
// run_catch_session(). (Compiling the single-header implementation is the slowest object of the
// suite: once, not once per main.)
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.h"

namespace tessera::testing {

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace tessera::testing
