// Replacing a file so that readers see the old bytes or the new ones, never a mix, and a crash at
// any point leaves the old file: what checkpoints, run logs and tool outputs rely on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

// A file written under a temporary name (`path + ".tmp.<pid>"`, same directory) and, on commit(),
// fsync'ed and renamed over `path`, then the directory fsync'ed. Destroyed without commit() (an
// error, an exception between writes) it removes the temporary, so an existing file at `path`
// survives any failure. Errors name `operation`, the path, the bytes written and the system's
// reason; a symlink at `path` is replaced, not followed.
class AtomicFileWriter {
 public:
  AtomicFileWriter(std::string path, std::string operation);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void write(const void* data, size_t n);
  void commit();
  uint64_t bytes_written() const { return written_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err) const;

  std::string path_, tmp_, operation_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Writes `content` to `path` atomically with AtomicFileWriter.
void write_file_atomically(const std::string& path, const std::string& content);

// Removes from `dir` (not its subfolders) the temporaries AtomicFileWriter left when its process was
// killed mid-write: names `<file>.tmp.<pid>` whose pid is no running process. Nothing else is touched,
// a live writer's temporary stays. A run folder calls it when it is opened again (a killed run leaves
// its args.yaml, summary.csv or checkpoint temporaries behind; nobody else would ever rename them).
// Best effort: a file that cannot be removed is left.
void remove_abandoned_temporaries(const std::string& dir);

// Fault injection for tests: a disk that fills up. While set, writes through AtomicFileWriter in
// this process fail with ENOSPC ("No space left on device") once `bytes` more bytes have been
// written in all; std::nullopt (the default) turns it off. Not for use outside tests.
void set_disk_space_for_testing(std::optional<uint64_t> bytes);

}  // namespace tessera
