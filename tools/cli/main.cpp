// The `tessera` program (build/bin/tessera): the command line of tools/cli/dispatch.cpp.
#include "tools/cli/commands.h"

int main(int argc, char** argv) { return tessera::cli::main(argc, argv); }
