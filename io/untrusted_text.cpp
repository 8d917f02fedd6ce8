// Checks on untrusted YAML text (io/untrusted_text.h).
#include "tessera/io/untrusted_text.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "tessera/core/error.h"

namespace tessera::io {

namespace {

std::string size_text(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu bytes (%.1f MiB)", bytes, static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// The length of the UTF-8 sequence at text[i], or 0 where it is not one (overlong forms, UTF-16
// surrogates and code points past U+10FFFF are not).
size_t utf8_length(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u; };
  const unsigned c = byte(i);
  const auto continuation = [&](size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return continuation(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned c1 = byte(i + 1);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) return 0;
    return continuation(i + 1) && continuation(i + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned c1 = byte(i + 1);
    if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;
    return continuation(i + 1) && continuation(i + 2) && continuation(i + 3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

void check_untrusted_yaml(const std::string& text, const std::string& what) {
  TS_CHECK(text.size() <= kMaxYamlBytes, what, ": ", size_text(text.size()), ", more than the ",
           size_text(kMaxYamlBytes), " such a file may have");
  // Line by line: the encoding, then the nesting of the line's start (indentation and "- "
  // entries) and of its flow brackets outside quotes and comments.
  std::vector<size_t> indents;  // the block levels open above this line
  int flow = 0;                 // brackets open across lines
  size_t line = 1, line_start = 0;
  const auto fail = [&](size_t at, const std::string& problem) {
    throw Error(detail::concat(what, ": line ", line, ", byte ", at, " (column ", at - line_start + 1, "): ", problem));
  };
  for (size_t i = 0; i < text.size(); line_start = ++i, ++line) {
    const size_t end = std::min(text.find('\n', i), text.size());
    for (size_t k = i; k < end;) {
      const size_t n = utf8_length(text, k);
      if (n == 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[k]));
        fail(k, std::string("not valid UTF-8 (byte ") + hex + "); such a file must be UTF-8 text");
      }
      if (text[k] == '\0') fail(k, "a NUL byte; such a file must be text");
      k += n;
    }
    size_t k = i;
    while (k < end && text[k] == ' ') ++k;
    const bool blank = k == end || text[k] == '#' || text[k] == '\r';
    if (!blank && flow == 0) {
      size_t indent = k - i;
      while (!indents.empty() && indents.back() >= indent) indents.pop_back();
      indents.push_back(indent);
      // "- - - x": each entry marker opens a level of its own.
      while (k + 1 < end && text[k] == '-' && text[k + 1] == ' ') {
        k += 2;
        while (k < end && text[k] == ' ') ++k;
        indents.push_back(k - i);
      }
    }
    char quote = 0;
    for (size_t c = k; c < end && !blank; ++c) {
      const char ch = text[c];
      if (quote) {
        if (ch == '\\' && quote == '"') ++c;
        else if (ch == quote) quote = 0;
      } else if (ch == '"' || ch == '\'') {
        quote = ch;
      } else if (ch == '#' && (c == i || text[c - 1] == ' ')) {
        break;
      } else if (ch == '[' || ch == '{') {
        ++flow;
      } else if ((ch == ']' || ch == '}') && flow > 0) {
        --flow;
      }
      if (static_cast<int>(indents.size()) + flow > kMaxYamlNesting)
        fail(c, detail::concat("nested more than ", kMaxYamlNesting, " levels deep (a model file nests 6-8)"));
    }
    if (static_cast<int>(indents.size()) + flow > kMaxYamlNesting)
      fail(k, detail::concat("nested more than ", kMaxYamlNesting, " levels deep (a model file nests 6-8)"));
    i = end;
    if (i >= text.size()) break;
  }
}

std::string read_untrusted_yaml(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  TS_CHECK(!ec, what, ": cannot be read: cannot open it (", ec.message(), ")");
  TS_CHECK(bytes <= kMaxYamlBytes, what, ": ", size_text(static_cast<size_t>(bytes)), ", more than the ",
           size_text(kMaxYamlBytes), " such a file may have");
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), what, ": cannot be read: cannot open it");
  std::ostringstream text;
  text << in.rdbuf();
  TS_CHECK(!in.bad(), what, ": read failed");
  return text.str();
}

}  // namespace tessera::io
