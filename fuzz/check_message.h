// What every harness asserts about the errors it provokes: their messages are printable text
// (core/printable.h), so a crafted file can neither send escape sequences to a terminal nor put
// invalid UTF-8 into a log. A message that is not aborts the run, which libFuzzer reports as a
// crash and saves the input that caused it.
#pragma once
#include <cstdio>
#include <cstdlib>

#include "tessera/core/error.h"
#include "tessera/core/printable.h"

namespace tessera::fuzz {

inline void check_message(const tessera::Error& e) {
  if (tessera::is_printable(e.what())) return;
  std::fprintf(stderr, "fuzz: an error message is not printable text: %s\n", tessera::printable(e.what()).c_str());
  std::abort();
}

}  // namespace tessera::fuzz
