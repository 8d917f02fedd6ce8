// The model flags of every model-building command (tools/cli/model_flags.h), --model-kwargs
// above all: argv is the input split at newlines, parsed by the commands' ArgParser and turned
// into ModelOptions (numbers, device, KEY=VALUE pairs). A model is then built from the options
// (the registry's checks of each kwarg: names, integers, bounds) when --model names one of the
// XCiT, CaiT or UFO-ViT variants and --model-kwargs makes it tiny (depth and embed_dim given, every
// value at most 8): a hostile *size* costs memory and time by design (the user asked for it), which
// is not the parsing question this harness asks. CoaT's widths are fixed by its variants, so its
// kwargs are parsed here but its models are never small enough to build per input.
#include <algorithm>
#include <set>

#include "tessera/models/registry.h"
#include "tools/cli/model_flags.h"
#include "fuzz/check_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> argv(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') argv.emplace_back();
    else argv.back() += static_cast<char>(data[i]);
  }
  if (std::find(argv.begin(), argv.end(), "--help") != argv.end() ||
      std::find(argv.begin(), argv.end(), "-h") != argv.end())
    return 0;  // prints the usage and stops, nothing to parse
  try {
    tessera::cli::ArgParser p("fuzz", "model flags");
    tessera::models::ModelOptions defaults;
    defaults.num_classes = 10;  // a head small enough to build per input
    tessera::cli::add_model_options(p, defaults);
    if (!p.parse(argv)) return 0;
    tessera::models::ModelOptions o = tessera::cli::model_options(p);
    static const std::set<std::string> small{"xcit_nano_12_p16_224", "cait_xxs24_224", "ufo_vit_t"};
    const std::string& name = p.get("--model");
    bool cheap = small.count(name) && o.model_kwargs.count("depth") && o.model_kwargs.count("embed_dim") &&
                 o.img_size >= 1 && o.img_size <= 32 && o.num_classes <= 16 && o.in_chans <= 4 && o.patch_size <= 32;
    for (const auto& [key, value] : o.model_kwargs) cheap = cheap && value <= 8;
    if (cheap && o.device.is_cpu()) (void)tessera::models::create_model(name, o);
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
