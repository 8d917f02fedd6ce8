// The version macros (tessera/version.h, generated from CMake's project version) and
// `tessera --version`, which reports them with the -march the library was built for.
#include <catch2/catch.hpp>

#include <string>

#include "tessera/version.h"
#include "tools/cli/commands.h"

TEST_CASE("the version macros agree with each other", "[version]") {
  const std::string joined = std::to_string(TESSERA_VERSION_MAJOR) + "." + std::to_string(TESSERA_VERSION_MINOR) + "." +
                             std::to_string(TESSERA_VERSION_PATCH);
  CHECK(joined == TESSERA_VERSION_STRING);
  CHECK(std::string(TESSERA_BUILD_ARCH).size() > 0);
}

TEST_CASE("tessera --version names the version, the build's -march and the backends", "[version][cli]") {
  const std::string text = tessera::cli::version_text();
  CHECK(text.rfind(std::string("tessera ") + TESSERA_VERSION_STRING + "\n", 0) == 0);
  CHECK(text.find(std::string("built for: -march=") + TESSERA_BUILD_ARCH + "\n") != std::string::npos);
  CHECK(text.find("\ncpu: ") != std::string::npos);
  CHECK(text.find("backends: cpu") != std::string::npos);
  char program[] = "tessera", flag[] = "--version";
  char* argv[] = {program, flag, nullptr};
  CHECK(tessera::cli::main(2, argv) == 0);
  char unknown[] = "--versio";
  char* bad[] = {program, unknown, nullptr};
  CHECK(tessera::cli::main(2, bad) == 2);
}
