// The training-state file of a checkpoint (checkpoint-<epoch>.state.safetensors): the input is the
// state file of a pair whose weights file is valid, read by load_checkpoint (pairing id, epoch and
// metric metadata, every tensor) and restored into an optimizer, an EMA and a loss scaler as
// --resume does.
#include "fuzz/check_message.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/training_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tessera::fuzz::TrainingState run;
  static const std::string weights = [] {
    const std::string path = (tessera::fuzz::scratch_dir() / "ck.safetensors").string();
    run.save_weights(path);
    return path;
  }();
  tessera::fuzz::write_file("ck.state.safetensors", data, size);
  try {
    run.restore(tessera::train::load_checkpoint(weights));
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
