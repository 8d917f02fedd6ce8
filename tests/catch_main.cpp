// main() of the test programs that need no set-up of their own.
#include "catch_session.h"

int main(int argc, char** argv) { return tessera::testing::run_catch_session(argc, argv); }
