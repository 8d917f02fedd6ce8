// The subcommands of the `tessera` tool, one file each in tools/cli/. Each takes the arguments
// after its name and returns the process exit code; errors are thrown as tessera::Error and
// printed by main().
#pragma once
#include <string>
#include <vector>

namespace tessera::cli {

using Argv = std::vector<std::string>;

int run_models(const Argv& args);         // models.cpp
int run_ops(const Argv& args);            // ops.cpp
int run_inspect(const Argv& args);        // inspect.cpp
int run_predict(const Argv& args);        // predict.cpp
int run_bench(const Argv& args);          // bench.cpp
int run_bench_data(const Argv& args);     // bench_data.cpp
int run_train(const Argv& args);          // train.cpp
int run_validate(const Argv& args);       // validate.cpp
int run_attention_map(const Argv& args);  // attention_map.cpp
int run_convert(const Argv& args);        // convert.cpp
int run_export(const Argv& args);         // export.cpp
int run_explain(const Argv& args);        // explain.cpp

// The whole command line, `tessera COMMAND ...` (dispatch.cpp): the subcommands above by name,
// `help` and `--version`; returns the exit code (2 for a usage error, 1 for a failed command).
int main(int argc, char** argv);
// What `tessera --version` prints: version, the -march built for, the CPU's vector units, backends.
std::string version_text();

}  // namespace tessera::cli
