// PyTorch checkpoints: the zip archive (end records, zip64, central directory, local headers,
// stored and deflated entries, CRCs), the restricted pickle interpreter, and every tensor's view
// against its storage. Any tessera::Error is a correct refusal; anything else (a crash, a sanitizer
// report, another exception type, a leak, a huge allocation) is a bug.
#include "fuzz/check_message.h"
#include "fuzz/fuzz_input.h"
#include "tessera/core/error.h"
#include "tessera/io/torch_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tessera::fuzz::write_file("input.pth", data, size);
  for (bool ema : {false, true}) {
    try {
      (void)tessera::load_torch_checkpoint(path, {.use_ema = ema});
    } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  }
  return 0;
}
