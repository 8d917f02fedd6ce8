// `tessera models`: the registered model names, one per line (timm's names); with --print NAME a
// named variant's model file (models/files/, docs/models.md), to copy and edit; with --mixers the
// token mixers a model file's block can name (the library's, then the program's registered ones).
#include <cstdio>

#include "tessera/models/model_file.h"
#include "tessera/models/model_file_names.h"
#include "tessera/models/registry.h"
#include "tessera/models/token_mixers.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

int run_models(const Argv& args) {
  ArgParser p("models", "List the registered model names (timm's names), one per line.");
  p.option("--print", "NAME",
           "print the named variant's model file (.yaml, docs/models.md) instead: save it, edit it, pass it as "
           "--model FILE.yaml");
  p.flag("--mixers",
         "list the token mixers a model file's `attn:` can name instead: the library's, then those the program "
         "registered (models/token_mixers.h)");
  if (!p.parse(args)) return 0;
  if (p.is_set("--mixers")) {
    for (const auto& [name, kind] : models::file_names::kMixers)
      std::printf("%.*s\n", static_cast<int>(name.size()), name.data());
    for (const std::string& name : models::registered_token_mixers()) std::puts(name.c_str());
    return 0;
  }
  if (p.given("--print")) {
    const std::string& name = p.get("--print");
    if (!models::is_shipped_model(name)) {
      bool registered = false;
      for (const std::string& n : models::model_names()) registered |= n == name;
      throw UsageError("option --print: " +
                       (registered ? "'" + name + "' is a model a program registered in C++; it has no model file"
                                   : "unknown model '" + name + "' (`tessera models` lists the names)"));
    }
    std::fputs(models::model_file_text(name).c_str(), stdout);
    return 0;
  }
  for (const std::string& n : models::model_names()) std::puts(n.c_str());
  return 0;
}

}  // namespace tessera::cli
