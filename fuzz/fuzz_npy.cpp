// .npy: preamble, the Python-dict header (descr, fortran_order, shape) and the claimed data size
// against the bytes present.
#include "tessera/core/error.h"
#include "tessera/io/npy.h"
#include "fuzz/check_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)tessera::io::parse_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
