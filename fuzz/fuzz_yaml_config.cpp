// A -c/--config file of `tessera train` (tools/cli/config_file.h): the input is the YAML text,
// read with train's config keys (as a timm args.yaml would be), its flags parsed by train's
// ArgParser, and each flag's value typed back for args.yaml and emitted with yaml-cpp. Malformed
// YAML, wrong types and bad flag values must come out as tessera::Error; anything else escaping
// (a YAML::Exception, std::out_of_range, ...) is a bug the fuzzer reports as a crash.
#include <cstdint>
#include <string>

#include "tessera/core/error.h"
#include "tools/cli/train.h"
#include "fuzz/check_message.h"

// yaml-cpp is a system library built without frame pointers, so on each of its many allocations
// ASan's fast unwinder follows garbage past the first frame and records a stack never seen
// before: in long runs the process grew to 1.4 GB and recording stacks took over a third of the
// time (about 790 inputs/s). Two frames still name the allocating call, and the harness runs 1.5x
// as many inputs a second; replay a saved input with ASAN_OPTIONS=malloc_context_size=30 for
// whole stacks.
extern "C" const char* __asan_default_options() { return "malloc_context_size=2"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  try {
    const tessera::cli::ConfigArgs config =
        tessera::cli::parse_config(yaml, "fuzz.yaml", tessera::cli::train_config_keys());
    tessera::cli::ArgParser p = tessera::cli::train_parser();
    if (!p.parse(config.argv)) return 0;
    for (const tessera::cli::ConfigKey& key : tessera::cli::train_config_keys())
      (void)tessera::train::yaml_text(tessera::cli::setting_value(key, p.get(tessera::cli::flag_name(key.dest))));
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
