// PNG (and the other formats stb_image reads: BMP, GIF, TGA, PNM, PSD, HDR, PIC) through our
// decode path: sniffing, stb_image's header, the pixel limit, the decode, channel conversion.
// JPEG-magic inputs are fuzz_jpeg's.
#include "fuzz/check_message.h"
#include "fuzz/decode_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return 0;
  tessera::fuzz::set_fuzz_decode_limit();
  for (int64_t channels : {3, 0}) {
    try {
      (void)tessera::data::decode_image_memory(data, size, "fuzz.png", channels);
    } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  }
  return 0;
}
