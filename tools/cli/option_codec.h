// Flag text <-> option values, by the value's C++ type: Codec<T> gives the config type of a member of
// type T (config_file.h), its value as flag text (a default, as --help shows it) and the flag text
// parsed into it, with a UsageError naming the flag for text of the wrong kind. An optional member
// is unset for an empty text (timm's None). The option tables (option_table.h) use them; a row whose
// text is spelled another way (--tf32 on|off) names its own codec with the same three members.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "tools/cli/args.h"
#include "tools/cli/config_file.h"

namespace tessera::cli {

// A double as the shortest text that reads back as the same value, with the exponent unpadded
// ("5e-4", "1e-6", "0.9998", "300").
std::string number_text(double v);

[[noreturn]] void bad_value(const std::string& flag, const char* expected, const std::string& text);
int64_t parse_integer(const std::string& flag, const std::string& text);
double parse_double(const std::string& flag, const std::string& text);
// Two numbers separated by a comma or spaces ("0.08,1.0", timm's "0.9 0.999").
std::array<double, 2> parse_two(const std::string& flag, const std::string& metavar, const std::string& text);

template <class T>
struct Codec;

template <class T>
requires std::is_integral_v<T> &&(!std::is_same_v<T, bool>)struct Codec<T> {
  static constexpr ConfigType type = ConfigType::Int;
  static std::string text(T v) { return std::to_string(v); }
  static T parse(const std::string& flag, const std::string&, const std::string& text) {
    const int64_t v = parse_integer(flag, text);
    // The seed is unsigned and takes any integer as its bits (as before); narrower ints must fit.
    if constexpr (sizeof(T) < sizeof(int64_t))
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
        bad_value(flag, "an integer in range", text);
    return static_cast<T>(v);
  }
};

template <>
struct Codec<double> {
  static constexpr ConfigType type = ConfigType::Float;
  static std::string text(double v) { return number_text(v); }
  static double parse(const std::string& flag, const std::string&, const std::string& text) {
    return parse_double(flag, text);
  }
};

template <>
struct Codec<std::string> {
  static constexpr ConfigType type = ConfigType::String;
  static std::string text(const std::string& v) { return v; }
  static std::string parse(const std::string&, const std::string&, const std::string& text) { return text; }
};

template <>
struct Codec<bool> {  // a switch: ArgParser holds "1" when given
  static constexpr ConfigType type = ConfigType::Switch;
  static std::string text(bool v) { return v ? "1" : ""; }
  static bool parse(const std::string&, const std::string&, const std::string& text) { return !text.empty(); }
};

// A pair of numbers given as one comma-separated argument (--scale 0.08,1.0).
template <>
struct Codec<std::array<double, 2>> {
  static constexpr ConfigType type = ConfigType::Numbers;
  static std::string text(const std::array<double, 2>& v) { return number_text(v[0]) + "," + number_text(v[1]); }
  static std::array<double, 2> parse(const std::string& flag, const std::string& metavar, const std::string& text) {
    return parse_two(flag, metavar, text);
  }
};

template <class T>
struct Codec<std::optional<T>> {
  // An optional pair is timm's nargs list (--opt-betas 0.9 0.999): separate arguments.
  static constexpr ConfigType type = std::is_same_v<T, std::array<double, 2>> ? ConfigType::NumberArgs : Codec<T>::type;
  static std::string text(const std::optional<T>& v) {
    if (!v) return "";
    std::string t = Codec<T>::text(*v);
    if constexpr (std::is_same_v<T, std::array<double, 2>>) std::replace(t.begin(), t.end(), ',', ' ');
    return t;
  }
  static std::optional<T> parse(const std::string& flag, const std::string& metavar, const std::string& text) {
    if (text.empty()) return std::nullopt;
    return Codec<T>::parse(flag, metavar, text);
  }
};

}  // namespace tessera::cli
