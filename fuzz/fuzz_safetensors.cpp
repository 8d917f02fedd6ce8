// safetensors: header (length, JSON, entries, offsets tiling the buffer) and data (every tensor
// loaded, BOOL bytes checked). Any tessera::Error is a correct refusal; anything else (a crash, a
// sanitizer report, another exception type, a leak) is a bug.
#include "tessera/core/error.h"
#include "fuzz/check_message.h"
#include "fuzz/fuzz_input.h"
#include "tessera/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tessera::fuzz::write_file("input.safetensors", data, size);
  try {
    const tessera::SafetensorsReader reader(path);
    for (const std::string& name : reader.names()) {
      try {
        (void)reader.load(name);  // an unloadable dtype refuses one tensor; the others still load
      } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
    }
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
