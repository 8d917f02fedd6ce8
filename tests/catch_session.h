// Runs the Catch2 session over the test cases linked into this program (tests/catch_session.cpp).
#pragma once

namespace tessera::testing {

int run_catch_session(int argc, char** argv);

}  // namespace tessera::testing
