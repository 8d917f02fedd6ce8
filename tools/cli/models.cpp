// `tessera models`: the registered model names, one per line (timm's names).
#include <cstdio>

#include "tessera/models/registry.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

int run_models(const Argv& args) {
  ArgParser p("models", "List the registered model names (timm's names), one per line.");
  if (!p.parse(args)) return 0;
  for (const std::string& n : models::model_names()) std::puts(n.c_str());
  return 0;
}

}  // namespace tessera::cli
