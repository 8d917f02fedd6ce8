// Model files (models/model_file.h): the input is a file's text, read with every check. What a
// file may do is bounded there; this harness asserts three things beyond "only tessera::Error
// escapes, with a printable message":
//   - what the reader accepts, the writer writes so that the reader reads it back the same;
//   - a model the checks accept is built, and runs on an image of its size, without an error: the
//     checks are complete (a constructor's or an op's error here is a gap in them, and aborts);
//   - only small models are built (widths, depths, image and head bounded below), so a hostile
//     size costs nothing: the checks refuse absurd sizes before the builder runs.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tessera/models/builder.h"
#include "tessera/models/model_file.h"
#include "tessera/ops/ops.h"
#include "fuzz/check_message.h"

// yaml-cpp's allocations, as fuzz_yaml_config.cpp explains: two frames of stack per allocation.
extern "C" const char* __asan_default_options() { return "malloc_context_size=2"; }

namespace {

using namespace tessera::models;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_model_file: %s: %s\n", what, tessera::printable(detail).c_str());
  std::abort();
}

// Small enough to build and run per input.
bool small(const ModelSpec& s) {
  bool ok = s.img_size <= 64 && s.num_classes <= 16 && s.in_chans <= 4 && s.parallel_blocks.repeat <= 2 &&
            s.parallel_blocks.mlp_ratio <= 4 && s.head.class_attention.repeat <= 2 &&
            s.head.class_attention.mlp_ratio <= 4 && s.head.class_attention.attn_dim <= 64;
  int64_t blocks = 0;
  for (const StageSpec& st : s.stages) {
    ok = ok && st.embed_dim <= 64;
    for (const BlockSpec& b : st.blocks) {
      blocks += b.repeat;
      ok = ok && b.mlp_ratio <= 4 && b.attn_dim <= 64;
    }
  }
  return ok && blocks <= 8;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ModelSpec spec;
  try {
    spec = read_model_file(text, "fuzz.yaml");
  } catch (const tessera::Error& e) {
    tessera::fuzz::check_message(e);
    return 0;
  }
  const std::string written = write_model_file(spec);
  try {
    if (!same_architecture(read_model_file(written, "written.yaml"), spec)) fail("read back differently", written);
  } catch (const tessera::Error& e) { fail("its written file is refused", std::string(e.what()) + "\n" + written); }
  if (!small(spec)) return 0;
  try {
    const auto model = build_model(spec);
    model->eval();
    tessera::NoGradGuard no_grad;
    (void)model->forward(tessera::zeros({1, spec.in_chans, spec.img_size, spec.img_size}));
  } catch (const tessera::Error& e) {
    fail("a model the checks accept does not build or run", std::string(e.what()) + "\n" + written);
  }
  return 0;
}
