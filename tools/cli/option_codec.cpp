// Flag text <-> option values; see tools/cli/option_codec.h.
#include "tools/cli/option_codec.h"

#include <charconv>
#include <sstream>

namespace tessera::cli {

std::string number_text(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string text(buf, ec == std::errc() ? end : buf);
  const size_t e = text.find('e');
  if (e != std::string::npos) {
    size_t digits = e + 1 + (text[e + 1] == '-' || text[e + 1] == '+');
    if (text[e + 1] == '+') text.erase(e + 1, 1), --digits;
    while (digits + 1 < text.size() && text[digits] == '0') text.erase(digits, 1);
  }
  return text;
}

void bad_value(const std::string& flag, const char* expected, const std::string& text) {
  throw UsageError("option " + flag + ": expected " + expected + ", got '" + text + "'");
}

int64_t parse_integer(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {}
  bad_value(flag, "an integer", text);
}

double parse_double(const std::string& flag, const std::string& text) {
  double v = 0;
  if (!parse_number(text, &v)) bad_value(flag, "a number", text);
  return v;
}

std::array<double, 2> parse_two(const std::string& flag, const std::string& metavar, const std::string& text) {
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');
  std::istringstream in(spaced);
  std::string a, b, extra;
  std::array<double, 2> v{};
  if (!(in >> a >> b) || (in >> extra) || !parse_number(a, &v[0]) || !parse_number(b, &v[1]))
    bad_value(flag, ("two numbers (" + metavar + ")").c_str(), text);
  return v;
}

}  // namespace tessera::cli
