// What the harnesses share: the fuzzer's bytes as a file on disk, for parsers whose public entry
// point takes a path (safetensors is memory-mapped, datasets are folders).
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessera::fuzz {

// A folder of this process's own (removed when the process ends normally), on tmpfs when there is
// one: writing a file per input must cost little next to parsing it.
inline const std::filesystem::path& scratch_dir() {
  static const struct Dir {
    std::filesystem::path path;
    Dir() {
      const std::filesystem::path shm = "/dev/shm";
      const auto base = std::filesystem::is_directory(shm) ? shm : std::filesystem::temp_directory_path();
      path = base / ("tessera_fuzz_" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir;
  return dir.path;
}

// Writes `data` to `name` inside scratch_dir() (subfolders created) and returns its path.
inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::filesystem::path path = scratch_dir() / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

}  // namespace tessera::fuzz
