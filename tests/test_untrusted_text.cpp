// Model files and configs as untrusted input (io/untrusted_text.h): a file that is not UTF-8, one
// far larger than any real one, and one nested deeper than any real one are refused before
// yaml-cpp parses them, with the file, line and byte; every shipped model file passes.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <string>

#include "temp_dir.h"
#include "tessera/core/error.h"
#include "tessera/io/untrusted_text.h"
#include "tessera/models/model_file.h"
#include "tools/cli/config_file.h"

using namespace tessera;

namespace {

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("a model file that is not UTF-8 is refused at load, naming its line and byte", "[model_file][untrusted]") {
  testing::TempDir dir;
  // A Latin-1 comment on line 2 (byte 0xE9 for e-acute), as in the report.
  const std::string text = models::model_file_text("xcit_nano_12_p16_224");
  const size_t second_line = text.find('\n') + 1;
  const std::string latin1 = text.substr(0, second_line) + "# caf\xE9\n" + text.substr(second_line);
  const std::string path = write(dir, "latin1.yaml", latin1);
  CHECK_THROWS_WITH(models::load_model_file(path),
                    Catch::Contains("model file " + path + ": line 2, byte " + std::to_string(second_line + 5)) &&
                        Catch::Contains("not valid UTF-8 (byte 0xE9)"));
  // The same comment in UTF-8 is accepted.
  const std::string utf8 = text.substr(0, second_line) + "# caf\xC3\xA9 \xF0\x9F\x98\x80\n" + text.substr(second_line);
  CHECK_NOTHROW(models::load_model_file(write(dir, "utf8.yaml", utf8)));
}

TEST_CASE("UTF-8 is checked as the standard defines it", "[untrusted]") {
  for (const std::string& bad :
       {std::string("a: \xC0\xAF"), std::string("a: \xED\xA0\x80"), std::string("a: \xF4\x90\x80\x80"),
        std::string("a: \xE2\x82"), std::string("a: \0c", 5), std::string("a: \x80")}) {
    INFO(bad.size() << " bytes");
    CHECK_THROWS_WITH(io::check_untrusted_yaml(bad, "x"), Catch::Contains("x: line 1, byte 3"));
  }
  CHECK_NOTHROW(io::check_untrusted_yaml("a: \xE2\x82\xAC\nb: \xF0\x90\x8D\x88\n", "x"));
}

TEST_CASE("a model file larger than 1 MiB is refused before it is read", "[model_file][untrusted]") {
  testing::TempDir dir;
  std::string big = models::model_file_text("xcit_nano_12_p16_224");
  big.reserve(3 << 20);
  while (big.size() <= (2u << 20)) big += "# padding padding padding padding padding padding padding padding\n";
  const std::string path = write(dir, "big.yaml", big);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(models::load_model_file(path),
                    Catch::Contains("model file " + path + ": " + std::to_string(big.size()) + " bytes") &&
                        Catch::Contains("more than the 1048576 bytes (1.0 MiB) such a file may have"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(100));
  // As text (a checkpoint's recorded model file) too.
  CHECK_THROWS_WITH(models::read_model_file(big, "recorded"), Catch::Contains("model file recorded: "));
}

TEST_CASE("a model file nested deeper than 32 levels is refused naming the line", "[model_file][untrusted]") {
  std::string flow = "name: deep\nstages: " + std::string(100, '[') + std::string(100, ']') + "\n";
  CHECK_THROWS_WITH(models::read_model_file(flow, "deep.yaml"), Catch::Contains("model file deep.yaml: line 2") &&
                                                                    Catch::Contains("nested more than 32 levels deep"));
  std::string block = "name: deep\n";
  for (int i = 0; i < 40; ++i) block += std::string(2 * static_cast<size_t>(i), ' ') + "k" + std::to_string(i) + ":\n";
  CHECK_THROWS_WITH(models::read_model_file(block, "block.yaml"),
                    Catch::Contains("model file block.yaml: line 34") && Catch::Contains("nested more than 32"));
  std::string dashes = "stages:\n";  // "- - - ... x": each entry a level
  for (int i = 0; i < 40; ++i) dashes += "- ";
  dashes += "x\n";
  CHECK_THROWS_WITH(io::check_untrusted_yaml(dashes, "dashes"), Catch::Contains("dashes: line 2"));
}

TEST_CASE("every shipped model file is within the limits", "[model_file][untrusted]") {
  REQUIRE(models::shipped_model_files().size() >= 50);
  for (const auto& file : models::shipped_model_files()) {
    INFO(file.name);
    CHECK_NOTHROW(io::check_untrusted_yaml(file.text, file.name));
  }
}

TEST_CASE("a -c config or args.yaml has the same limits", "[config][untrusted]") {
  testing::TempDir dir;
  const std::vector<cli::ConfigKey> keys = {{"lr", cli::ConfigType::Float}};
  const std::string latin1 = write(dir, "args.yaml", "lr: 0.1\n# d\xE9j\xE0\n");
  CHECK_THROWS_WITH(cli::read_config(latin1, keys),
                    Catch::Contains("config " + latin1 + ": line 2, byte 11") && Catch::Contains("not valid UTF-8"));
  const std::string big = write(dir, "big.yaml", "lr: 0.1\n" + std::string(2 << 20, '#') + "\n");
  CHECK_THROWS_WITH(cli::read_config(big, keys), Catch::Contains("more than the 1048576 bytes"));
  CHECK(cli::read_config(write(dir, "ok.yaml", "lr: 0.1\n"), keys).argv == std::vector<std::string>{"--lr=0.1"});
}
