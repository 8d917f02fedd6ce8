// The pixel limit the image harnesses decode under: the guard itself is what they test (a header
// over the limit must be refused before allocating), and a limit far below the default keeps one
// input from costing seconds of memset inside the fuzzer's memory budget.
#pragma once
#include "tessera/data/decode.h"

namespace tessera::fuzz {

inline void set_fuzz_decode_limit() {
  static const bool once = (data::set_max_image_pixels(int64_t{1} << 18), true);
  (void)once;
}

}  // namespace tessera::fuzz
