// A small JSON (RFC 8259) pull parser and string quoting, written for file headers such as the
// safetensors header (io/safetensors.cpp). It reads a document front to back without building a
// tree: the caller asks for the value it expects next (object, array, string, number) and skips
// the rest, so memory stays proportional to what the caller keeps, whatever the input holds.
//
// Strict where it matters for untrusted input: the text must be valid UTF-8, strings may not hold
// raw control characters, \uXXXX escapes must pair surrogates correctly, numbers follow the JSON
// grammar, nesting is limited (no stack exhaustion), and nothing but whitespace may follow the
// document. Every syntax error throws json::SyntaxError "JSON: <what> at byte <offset>".
#pragma once
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/error.h"

namespace tessera::json {

// Malformed JSON text. what() is "JSON: <reason> at byte <offset>"; callers that know where the
// text came from (a file, a header) can rephrase it from the parts.
class SyntaxError : public Error {
 public:
  SyntaxError(std::string reason, size_t offset);
  const std::string& reason() const { return reason_; }
  size_t offset() const { return offset_; }

 private:
  std::string reason_;
  size_t offset_;
};

enum class Kind { Null, Bool, Number, String, Array, Object };
const char* kind_name(Kind kind);  // "null", "boolean", "number", "string", "array", "object"

// Byte offset of the first byte that is not part of well-formed UTF-8 (overlong forms, UTF-16
// surrogates and code points above U+10FFFF are malformed), or std::string_view::npos.
size_t invalid_utf8_offset(std::string_view text);

// Value of a JSON number literal as an unsigned 64-bit integer.
enum class IntParse { Ok, Negative, NotInteger, Overflow };
IntParse parse_uint64(std::string_view literal, uint64_t& out);

class Reader {
 public:
  static constexpr int kMaxDepth = 128;

  // The text is not copied: it must outlive the reader. Throws if it is not valid UTF-8.
  explicit Reader(std::string_view text);

  // Kind of the next value (skips whitespace); throws if no value can start here.
  Kind peek();

  // Objects: begin_object() consumes '{'; then next_member(key) reads `"key":` and returns true,
  // or consumes the closing '}' and returns false. The member's value must be read or skipped
  // before the next call. Arrays likewise with begin_array() / next_item().
  void begin_object();
  bool next_member(std::string& key);
  void begin_array();
  bool next_item();

  std::string read_string();       // decoded UTF-8 contents
  std::string_view read_number();  // the validated literal, e.g. "-12.5e3"
  void skip_value();               // any value, validated and discarded

  // Checks that only whitespace remains.
  void finish();

  size_t offset() const { return pos_; }
  [[noreturn]] void fail(std::string_view what) const;  // throws SyntaxError "JSON: <what> at byte <offset>"

 private:
  void skip_ws();
  void expect(char c);
  void enter();  // depth bookkeeping for begin_object/begin_array
  bool next_in(char close);
  void skip_literal(std::string_view word);
  unsigned read_hex4();

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::bitset<kMaxDepth + 1> first_;  // per open container: no element read yet
};

// Appends `s` (valid UTF-8) to `out` as a JSON string literal: quotes, backslash escapes for '"',
// '\\' and control characters; everything else verbatim.
void append_quoted(std::string& out, std::string_view s);

// Builds one JSON document front to back, the counterpart of Reader: every command's --json output
// goes through it, so names and paths with quotes, backslashes or control characters stay valid
// JSON. The layout is one line, ", " between elements and ": " after keys (what the commands have
// always printed, and what scripts grep for). Misuse (a value without a key in an object, an
// unclosed container at str()) is a bug in the caller and throws tessera::Error.
//   json::Writer w;
//   w.begin_object().key("model").value(name).key("params").value(n).end_object();
//   std::puts(w.str().c_str());
class Writer {
 public:
  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  Writer& key(std::string_view name);
  // Bytes that are not UTF-8 (a file name on Linux can hold any) become U+FFFD.
  Writer& value(std::string_view s);
  Writer& value(const char* s) { return value(std::string_view(s)); }
  Writer& value(const std::string& s) { return value(std::string_view(s)); }
  Writer& value(int64_t v);
  Writer& value(int v) { return value(static_cast<int64_t>(v)); }
  // The shortest text that reads back as the same double; NaN and infinities (which JSON cannot
  // spell) as null.
  Writer& value(double v);
  Writer& value(bool v);
  Writer& null();
  // The finished document; throws while a container is open.
  const std::string& str() const;

 private:
  void before_value();
  std::string out_;
  std::string open_;          // '{' or '[' per open container
  bool first_ = true;         // no element yet in the innermost container
  bool key_pending_ = false;  // a key was written; its value comes next
};

}  // namespace tessera::json
