// Atomic file replacement; see core/atomic_file.h.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace tessera {

namespace {

[[noreturn]] void io_error(const std::string& path, const char* what, int err) {
  throw Error(detail::concat("'", path, "': ", what, ": ", std::strerror(err),
                             " (an existing file at that path is left unchanged)"));
}

void sync_parent_directory(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the file itself is already in place
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error(path, "cannot create a temporary file", errno);
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t k = ::write(fd, p, left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      const int err = k < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      io_error(path, "write failed", err);
    }
    p += k;
    left -= static_cast<size_t>(k);
  }
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !synced) {
    ::unlink(tmp.c_str());
    io_error(path, "cannot sync the temporary file", synced ? errno : err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    io_error(path, "cannot rename the temporary file over it", e);
  }
  sync_parent_directory(path);
}

}  // namespace tessera
