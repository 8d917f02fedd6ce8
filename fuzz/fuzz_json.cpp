// The JSON pull reader (io/json.h) over any document: every value visited the way a caller reads
// it (members, items, decoded strings, numbers as uint64), then the end of the text checked.
#include "tessera/io/json.h"
#include "fuzz/check_message.h"

namespace {

void visit(tessera::json::Reader& r) {
  using tessera::json::Kind;
  switch (r.peek()) {
    case Kind::Object: {
      r.begin_object();
      std::string key;
      while (r.next_member(key)) visit(r);
      break;
    }
    case Kind::Array:
      r.begin_array();
      while (r.next_item()) visit(r);
      break;
    case Kind::String: {
      const std::string s = r.read_string();
      std::string quoted;  // what the writer makes of the decoded text must read back the same
      tessera::json::append_quoted(quoted, s);
      tessera::json::Reader back(quoted);
      if (back.read_string() != s) __builtin_trap();
      break;
    }
    case Kind::Number: {
      uint64_t v = 0;
      (void)tessera::json::parse_uint64(r.read_number(), v);
      break;
    }
    default: r.skip_value();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    tessera::json::Reader r(text);
    visit(r);
    r.finish();
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
