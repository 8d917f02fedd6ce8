// Errors: every check on user input throws tessera::Error with a message that names the operation
// and the offending shapes/dtypes/devices, escaped where it quotes untrusted bytes. Nothing in the
// library aborts on bad user input.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <cstdint>

#include "tessera/core/printable.h"

namespace tessera {

// Its message is always printable text (core/printable.h): bytes a hostile file put into it
// (a chunk type, a key, a dtype string) arrive escaped, whoever built the message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable(message)) {}
  explicit Error(const char* message) : Error(std::string(message)) {}
};

namespace detail {
inline std::ostream& put(std::ostream& os, const std::vector<int64_t>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << ']';
}
template <class T>
std::ostream& put(std::ostream& os, const T& v) {
  return os << v;
}
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (put(os, args), ...);
  return os.str();
}
}  // namespace detail

}  // namespace tessera

// TS_CHECK(cond, "op: message ", shape, ...) throws tessera::Error when cond is false. The message
// parts are streamed; std::vector<int64_t> (a Shape) prints as [2, 3].
#define TS_CHECK(cond, ...)                                                      \
  do {                                                                           \
    if (!(cond)) throw ::tessera::Error(::tessera::detail::concat(__VA_ARGS__)); \
  } while (0)
