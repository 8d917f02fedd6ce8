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
  // The EMA choice only picks another key of the parsed file: an odd-sized input takes it, so each
  // input is parsed once (half the time per execution) and the fuzzer still reaches both paths.
  try {
    (void)tessera::load_torch_checkpoint(path, {.use_ema = size % 2 == 1});
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
