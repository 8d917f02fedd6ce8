// Escaping untrusted bytes for terminals and logs; see core/printable.h.
#include "tessera/core/printable.h"

#include <cstdint>

namespace tessera {

namespace {

// The length of the well-formed, printable UTF-8 sequence at s[i] (1 for printable ASCII), or 0
// when the byte there must be escaped. Well-formed as Unicode's Table 3-7 defines it.
size_t printable_sequence(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return b0 >= 0x20 && b0 < 0x7f ? 1 : 0;
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) n = 2, cp = b0 & 0x1f, min = 0x80;
  else if (b0 >= 0xe0 && b0 <= 0xef) n = 3, cp = b0 & 0x0f, min = 0x800;
  else if (b0 >= 0xf0 && b0 <= 0xf4) n = 4, cp = b0 & 0x07, min = 0x10000;
  else return 0;  // a continuation byte alone, or a lead byte no well-formed sequence has
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;       // overlong, too large, surrogate
  if (cp < 0xa0) return 0;                                                         // C1 controls
  if ((cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) return 0;  // direction overrides
  return n;
}

}  // namespace

std::string printable(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    if (const size_t n = printable_sequence(bytes, i)) {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    const auto b = static_cast<uint8_t>(bytes[i++]);
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool is_printable(std::string_view text) { return printable(text) == text; }

}  // namespace tessera
