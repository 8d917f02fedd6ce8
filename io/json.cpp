// JSON pull parser (RFC 8259 grammar: section 4 objects, 5 arrays, 6 numbers, 7 strings, 8.1 UTF-8)
// and string quoting; see io/json.h.
#include "tessera/io/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace tessera::json {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "boolean";
    case Kind::Number: return "number";
    case Kind::String: return "string";
    case Kind::Array: return "array";
    case Kind::Object: return "object";
  }
  return "unknown";
}

size_t invalid_utf8_offset(std::string_view text) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07, min = 0x10000;
    else return i;  // continuation byte or 0xf8..0xff as a lead byte
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong encodings, UTF-16 surrogates and values past U+10FFFF are not UTF-8 (RFC 3629).
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

IntParse parse_uint64(std::string_view literal, uint64_t& out) {
  if (literal.find_first_of(".eE") != std::string_view::npos) return IntParse::NotInteger;
  if (!literal.empty() && literal[0] == '-') return IntParse::Negative;
  uint64_t v = 0;
  for (char c : literal) {
    const auto digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return IntParse::Overflow;
    v = v * 10 + digit;
  }
  out = v;
  return IntParse::Ok;
}

// ---- Reader ----------------------------------------------------------------------------------

namespace {
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A character for an error message: itself when printable ASCII, else its byte value.
std::string show(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", u);
  return buf;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}
}  // namespace

Reader::Reader(std::string_view text) : text_(text) {
  const size_t bad = invalid_utf8_offset(text);
  if (bad != std::string_view::npos) {
    pos_ = bad;
    fail("invalid UTF-8");
  }
}

SyntaxError::SyntaxError(std::string reason, size_t offset)
    : Error(detail::concat("JSON: ", reason, " at byte ", offset)), reason_(std::move(reason)), offset_(offset) {}

void Reader::fail(std::string_view what) const { throw SyntaxError(std::string(what), pos_); }

void Reader::skip_ws() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
    ++pos_;
}

void Reader::expect(char c) {
  if (pos_ >= text_.size()) fail(std::string("unexpected end of input, expected '") + c + "'");
  if (text_[pos_] != c) fail("expected '" + std::string(1, c) + "', found " + show(text_[pos_]));
  ++pos_;
}

Kind Reader::peek() {
  skip_ws();
  if (pos_ >= text_.size()) fail("unexpected end of input, expected a value");
  const char c = text_[pos_];
  switch (c) {
    case '{': return Kind::Object;
    case '[': return Kind::Array;
    case '"': return Kind::String;
    case 't':
    case 'f': return Kind::Bool;
    case 'n': return Kind::Null;
    default:
      if (c == '-' || is_digit(c)) return Kind::Number;
      fail("expected a value, found " + show(c));
  }
}

void Reader::enter() {
  if (depth_ >= kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
  ++pos_;  // the opening bracket
  ++depth_;
  first_[depth_] = true;
}

void Reader::begin_object() {
  if (peek() != Kind::Object) fail("expected '{', found " + show(text_[pos_]));
  enter();
}

void Reader::begin_array() {
  if (peek() != Kind::Array) fail("expected '[', found " + show(text_[pos_]));
  enter();
}

// Consumes the closing bracket (-> false) or, after the first element, the separating comma.
// A trailing comma is caught by whoever reads the element that should follow it.
bool Reader::next_in(char close) {
  skip_ws();
  if (pos_ < text_.size() && text_[pos_] == close) {
    ++pos_;
    --depth_;
    return false;
  }
  if (!first_[depth_]) {
    if (pos_ >= text_.size()) fail(std::string("unexpected end of input, expected ',' or '") + close + "'");
    if (text_[pos_] != ',') fail(std::string("expected ',' or '") + close + "', found " + show(text_[pos_]));
    ++pos_;
  }
  first_[depth_] = false;
  return true;
}

bool Reader::next_member(std::string& key) {
  if (!next_in('}')) return false;
  skip_ws();
  if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key");
  key = read_string();
  skip_ws();
  expect(':');
  return true;
}

bool Reader::next_item() { return next_in(']'); }

unsigned Reader::read_hex4() {
  unsigned v = 0;
  for (int k = 0; k < 4; ++k, ++pos_) {
    const char c = pos_ < text_.size() ? text_[pos_] : '\0';
    unsigned d;
    if (is_digit(c)) d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else fail("invalid \\u escape (expected 4 hex digits)");
    v = v * 16 + d;
  }
  return v;
}

std::string Reader::read_string() {
  skip_ws();
  expect('"');
  std::string out;
  for (;;) {
    if (pos_ >= text_.size()) fail("unterminated string");
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (c < 0x20) fail("raw control character " + show(static_cast<char>(c)) + " in string");
    if (c != '\\') {  // copy the run up to the next quote, escape or control character
      const size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\\' &&
             static_cast<unsigned char>(text_[pos_]) >= 0x20)
        ++pos_;
      out.append(text_.substr(start, pos_ - start));
      continue;
    }
    if (++pos_ >= text_.size()) fail("unterminated string");
    switch (text_[pos_++]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp = read_hex4();
        if (cp >= 0xdc00 && cp <= 0xdfff) fail("unpaired low surrogate in \\u escape");
        if (cp >= 0xd800 && cp <= 0xdbff) {  // UTF-16 pair: a high surrogate needs a low one next
          if (text_.substr(pos_, 2) != "\\u") fail("unpaired high surrogate in \\u escape");
          pos_ += 2;
          const uint32_t low = read_hex4();
          if (low < 0xdc00 || low > 0xdfff) fail("unpaired high surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        }
        append_utf8(out, cp);
        break;
      }
      default: --pos_; fail("invalid escape \\" + std::string(1, text_[pos_]));
    }
  }
}

std::string_view Reader::read_number() {
  skip_ws();
  const size_t start = pos_;
  auto digits = [&] {
    const size_t from = pos_;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    if (pos_ == from) fail("invalid number (expected a digit)");
  };
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '0') ++pos_;  // no leading zeros: "0" stands alone
  else digits();
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    digits();
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    digits();
  }
  return text_.substr(start, pos_ - start);
}

void Reader::skip_literal(std::string_view word) {
  if (text_.substr(pos_, word.size()) != word) fail("invalid literal (expected " + std::string(word) + ")");
  pos_ += word.size();
}

void Reader::skip_value() {
  switch (peek()) {
    case Kind::Object: {
      begin_object();
      std::string key;
      while (next_member(key)) skip_value();
      break;
    }
    case Kind::Array:
      begin_array();
      while (next_item()) skip_value();
      break;
    case Kind::String: read_string(); break;
    case Kind::Number: read_number(); break;
    case Kind::Bool: skip_literal(text_[pos_] == 't' ? "true" : "false"); break;
    case Kind::Null: skip_literal("null"); break;
  }
}

void Reader::finish() {
  skip_ws();
  if (pos_ != text_.size()) fail("unexpected " + show(text_[pos_]) + " after the end of the document");
}

// ---- writing ---------------------------------------------------------------------------------

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

Writer& Writer::begin_object() {
  before_value();
  out_ += '{';
  open_ += '{';
  first_ = true;
  return *this;
}

Writer& Writer::begin_array() {
  before_value();
  out_ += '[';
  open_ += '[';
  first_ = true;
  return *this;
}

Writer& Writer::end_object() {
  TS_CHECK(!open_.empty() && open_.back() == '{' && !key_pending_, "json::Writer: end_object without an open object");
  open_.pop_back();
  out_ += '}';
  first_ = false;
  return *this;
}

Writer& Writer::end_array() {
  TS_CHECK(!open_.empty() && open_.back() == '[', "json::Writer: end_array without an open array");
  open_.pop_back();
  out_ += ']';
  first_ = false;
  return *this;
}

Writer& Writer::key(std::string_view name) {
  TS_CHECK(!open_.empty() && open_.back() == '{' && !key_pending_, "json::Writer: key '", name,
           "' outside an object or after another key");
  if (!first_) out_ += ", ";
  first_ = false;
  append_quoted(out_, name);
  out_ += ": ";
  key_pending_ = true;
  return *this;
}

void Writer::before_value() {
  if (!open_.empty() && open_.back() == '{') {
    TS_CHECK(key_pending_, "json::Writer: a value in an object needs a key first");
    key_pending_ = false;
    return;
  }
  TS_CHECK(!open_.empty() || out_.empty(), "json::Writer: a second value after the finished document");
  if (!open_.empty() && !first_) out_ += ", ";
  first_ = false;
}

Writer& Writer::value(std::string_view s) {
  before_value();
  if (invalid_utf8_offset(s) == std::string_view::npos) {
    append_quoted(out_, s);
    return *this;
  }
  std::string valid;
  while (!s.empty()) {
    const size_t bad = invalid_utf8_offset(s);
    valid.append(s.substr(0, bad));
    if (bad == std::string_view::npos) break;
    valid += "\xef\xbf\xbd";  // U+FFFD, the replacement character
    s.remove_prefix(bad + 1);
  }
  append_quoted(out_, valid);
  return *this;
}

Writer& Writer::value(int64_t v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}

Writer& Writer::value(double v) {
  if (!std::isfinite(v)) return null();
  before_value();
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out_.append(buf, end);
  return *this;
}

Writer& Writer::value(bool v) {
  before_value();
  out_ += v ? "true" : "false";
  return *this;
}

Writer& Writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

const std::string& Writer::str() const {
  TS_CHECK(open_.empty() && !out_.empty(), "json::Writer: str() of an unfinished document");
  return out_;
}

}  // namespace tessera::json
