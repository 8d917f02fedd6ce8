// JPEG through our decode path (data/decode.h: libjpeg-turbo's header, the pixel limit, the
// decode with warnings sorted into corrupt / truncated / accepted, CMYK conversion, channel
// conversion), at full size and as the transforms decode a crop (data/encoded_image.h: the header
// read alone, then reduced in the DCT domain by a factor the input's fourth byte picks, whole and
// around its central quarter through libjpeg's partial decoding). Inputs that do not start with the JPEG magic go to stb_image, fuzz_png's target,
// so they are left out here to keep this harness on the JPEG path.
#include <algorithm>
#include <string>

#include "fuzz/check_message.h"
#include "fuzz/decode_limits.h"
#include "tessera/data/encoded_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF) return 0;
  tessera::fuzz::set_fuzz_decode_limit();
  for (int64_t channels : {3, 1}) {
    try {
      (void)tessera::data::decode_image_memory(data, size, "fuzz.jpg", channels);
    } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  }
  try {
    const auto image =
        tessera::data::EncodedImage::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.jpg", 3);
    const int64_t out = 1 + data[3] % 64;  // the output side a reduction must still cover
    const int64_t h = image.height(), w = image.width();
    (void)image.decode_for(tessera::data::Box{0, 0, h, w}, out, out);
    (void)image.decode_for(tessera::data::Box{h / 4, w / 4, std::max<int64_t>(1, h / 2), std::max<int64_t>(1, w / 2)},
                           out, out);  // decoded around the region (decode_jpeg_region)
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
