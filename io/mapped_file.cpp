#include "tessera/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

#include "tessera/core/error.h"

namespace tessera {

MappedFile::MappedFile(const std::string& path, const std::string& reader) {
  const auto fail = [&](const auto&... what) { throw Error(detail::concat(reader, ": '", path, "': ", what...)); };
  const auto errno_text = [](int e) { return std::error_code(e, std::system_category()).message(); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open: ", errno_text(errno));
  struct stat st {};
  int err = 0;
  void* addr = nullptr;
  if (::fstat(fd, &st) != 0) err = errno;
  else if (S_ISREG(st.st_mode) && st.st_size > 0) {
    addr = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) err = errno, addr = nullptr;
  }
  ::close(fd);
  if (err) fail("cannot read: ", errno_text(err));
  if (!S_ISREG(st.st_mode)) fail(S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
  data_ = static_cast<const unsigned char*>(addr);
  size_ = addr ? static_cast<size_t>(st.st_size) : 0;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

void MappedFile::release_pages(const void* p, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace tessera
