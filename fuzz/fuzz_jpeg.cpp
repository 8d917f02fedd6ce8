// JPEG through our decode path (data/decode.h: libjpeg-turbo's header, the pixel limit, the
// decode with warnings sorted into corrupt / truncated / accepted, CMYK conversion, channel
// conversion). Inputs that do not start with the JPEG magic go to stb_image, fuzz_png's target,
// so they are left out here to keep this harness on the JPEG path.
#include "fuzz/check_message.h"
#include "fuzz/decode_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF) return 0;
  tessera::fuzz::set_fuzz_decode_limit();
  for (int64_t channels : {3, 1}) {
    try {
      (void)tessera::data::decode_image_memory(data, size, "fuzz.jpg", channels);
    } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  }
  return 0;
}
