// A fresh directory under the system temp dir for one test, removed with everything in it. The
// name holds the process id and a counter, so test cases that CTest runs as parallel processes
// never share files.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

namespace tessera::testing {

struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    static std::atomic<int> counter{0};
    dir = std::filesystem::temp_directory_path() /
          ("tessera_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path() const { return dir.string(); }
  // Path of `name` inside the dir, creating its parent folders.
  std::string file(const std::string& name) const {
    std::filesystem::create_directories((dir / name).parent_path());
    return (dir / name).string();
  }
  // Files left behind by an interrupted atomic write (their names hold ".tmp.").
  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
    return out;
  }
};

}  // namespace tessera::testing
