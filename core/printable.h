// Text that came from an untrusted file (a PNG chunk type, a safetensors key, a .npy dtype, a YAML
// key, a file name inside an archive), made safe to print: a crafted file must not be able to send
// escape sequences to a terminal or put invalid UTF-8 into a log. Every tessera::Error message
// passes through printable() (core/error.h), so no parser can forget it; the fuzz harnesses check
// with is_printable() that every message they provoke is.
#pragma once
#include <string>
#include <string_view>

namespace tessera {

// `bytes` with printable ASCII and well-formed UTF-8 kept as they are, and every other byte written
// as \xNN: control characters (C0 with tab and newline, DEL, C1 such as U+009B, a terminal's CSI),
// the Unicode direction overrides and isolates (U+202A-U+202E, U+2066-U+2069, which reorder what a
// reader sees), and malformed, overlong, surrogate or out-of-range UTF-8 sequences, byte by byte.
std::string printable(std::string_view bytes);

// True when printable(text) == text.
bool is_printable(std::string_view text);

}  // namespace tessera
