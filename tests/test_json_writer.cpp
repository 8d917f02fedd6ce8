// json::Writer (io/json.h): the documents it writes read back with json::Reader to the same values,
// whatever the strings hold; misuse is refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "tessera/io/json.h"

using namespace tessera;

TEST_CASE("json::Writer: strings with quotes, backslashes and control characters read back unchanged", "[json]") {
  const std::string tricky = "C:\\runs\\\"best\".safetensors\n\ttab \x01 ü";
  json::Writer w;
  w.begin_object().key("path").value(tricky).key("n").value(int64_t{-12}).key("x").value(0.1);
  w.key("list").begin_array().value(true).null().begin_array().end_array().end_array();
  w.key(tricky).value(false).end_object();
  CHECK(w.str().rfind("{\"path\": \"C:\\\\runs\\\\\\\"best\\\".safetensors\\n\\ttab \\u0001 ü\", \"n\": -12, "
                      "\"x\": 0.1, \"list\": [true, null, []], ",
                      0) == 0);
  json::Reader r(w.str());
  r.begin_object();
  std::string key;
  REQUIRE(r.next_member(key));
  CHECK(r.read_string() == tricky);
  REQUIRE(r.next_member(key));
  CHECK(r.read_number() == "-12");
  REQUIRE(r.next_member(key));
  CHECK(std::stod(std::string(r.read_number())) == 0.1);
  REQUIRE(r.next_member(key));
  r.skip_value();
  REQUIRE(r.next_member(key));
  CHECK(key == tricky);
  r.skip_value();
  CHECK(!r.next_member(key));
  r.finish();
}

TEST_CASE("json::Writer: non-UTF-8 bytes become U+FFFD, non-finite numbers null", "[json]") {
  json::Writer w;
  w.begin_array()
      .value(std::string("a\xff"
                         "b"))
      .value(std::nan(""))
      .value(std::numeric_limits<double>::infinity());
  w.end_array();
  CHECK(w.str() ==
        "[\"a\xef\xbf\xbd"
        "b\", null, null]");
  json::Reader(w.str()).skip_value();  // valid JSON
}

TEST_CASE("json::Writer: misuse is an error", "[json]") {
  CHECK_THROWS_WITH(json::Writer().begin_object().value(1), Catch::Contains("needs a key"));
  CHECK_THROWS_WITH(json::Writer().begin_array().key("k"), Catch::Contains("outside an object"));
  CHECK_THROWS_WITH(json::Writer().begin_array().end_object(), Catch::Contains("end_object"));
  CHECK_THROWS_WITH(json::Writer().begin_object().str(), Catch::Contains("unfinished"));
  CHECK_THROWS_WITH(json::Writer().value(1).value(2), Catch::Contains("second value"));
}
