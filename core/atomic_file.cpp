// Atomic file replacement; see core/atomic_file.h.
#include "tessera/core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"

namespace tessera {

namespace {

// The space left on the simulated disk, or -1 when no fault is injected.
std::atomic<int64_t> g_disk_space{-1};

// ::write, or ENOSPC once the simulated disk is full (a short write first, as a real disk gives).
ssize_t write_some(int fd, const char* p, size_t n) {
  int64_t left = g_disk_space.load();
  while (left >= 0) {
    const int64_t take = std::min<int64_t>(left, static_cast<int64_t>(n));
    if (take == 0) {
      errno = ENOSPC;
      return -1;
    }
    if (g_disk_space.compare_exchange_weak(left, left - take)) {
      n = static_cast<size_t>(take);
      break;
    }
  }
  return ::write(fd, p, n);
}

void sync_parent_directory(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the file itself is already in place
  ::fsync(fd);
  ::close(fd);
}

// The pid in a temporary's name (`<file>.tmp.<pid>`), or 0 when the name is not one.
pid_t temporary_owner(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return 0;
  const char* first = name.data() + at + 5;
  const char* last = name.data() + name.size();
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(first, last, pid);
  return ec == std::errc() && end == last && first != last && pid > 0 ? pid : 0;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, std::string operation)
    : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())), operation_(std::move(operation)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) fail("cannot create the temporary file", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = write_some(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      fail(detail::concat("write failed after ", written_, " bytes, with ", n, " more to write"), k < 0 ? errno : EIO);
    p += k;
    n -= static_cast<size_t>(k);
    written_ += static_cast<uint64_t>(k);
  }
}

void AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) fail("fsync failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename the temporary file over it", errno);
  committed_ = true;
  sync_parent_directory(path_);  // makes the rename durable; the new file is in place already
}

void AtomicFileWriter::fail(const std::string& what, int err) const {
  throw Error(detail::concat(operation_, ": '", path_, "': ", what, " ('", tmp_, "'): ", std::strerror(err),
                             "; an existing file at that path is left unchanged"));
}

void write_file_atomically(const std::string& path, const std::string& content) {
  AtomicFileWriter file(path, "write");
  file.write(content.data(), content.size());
  file.commit();
}

void remove_abandoned_temporaries(const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t owner = temporary_owner(it->path().filename().string());
    // kill(pid, 0) probes without signalling: ESRCH means no such process (EPERM: alive, not ours).
    if (owner == 0 || owner == ::getpid() || ::kill(owner, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    if (it->is_regular_file(ignored)) std::filesystem::remove(it->path(), ignored);
  }
}

void set_disk_space_for_testing(std::optional<uint64_t> bytes) {
  g_disk_space.store(bytes ? static_cast<int64_t>(std::min<uint64_t>(*bytes, INT64_MAX)) : -1);
}

}  // namespace tessera
