// Reading the zip archives that PyTorch's torch.save writes (since PyTorch 1.6): the central
// directory, zip64 records, stored and deflated entries (APPNOTE.TXT, PKWARE's .ZIP File Format
// Specification 6.3: 4.3.6 local headers, 4.3.12 central directory, 4.3.14-16 zip64 end records,
// 4.5.3 the zip64 extra field).
//
// Nothing in the archive is trusted: every offset and size is checked against the file before it is
// used, an entry's bytes are checked against its CRC-32, and a deflated entry must not claim more
// bytes than deflate can produce from its compressed size (1032 to 1: the most a deflate stream
// expands), so a zip bomb is refused before anything is allocated. Errors name the archive and the
// entry: "zip: 'FILE': entry 'archive/data/0': ...".
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera {

class MappedFile;

class ZipArchive {
 public:
  struct Entry {
    std::string name;
    uint16_t method = 0;  // 0 stored, 8 deflated (others are refused when read)
    uint16_t flags = 0;
    uint32_t crc32 = 0;
    uint64_t compressed_size = 0;
    uint64_t size = 0;  // uncompressed
    uint64_t local_header_offset = 0;
  };

  // Maps `path` and reads its central directory. Throws naming the file when it is not a zip
  // archive or its directory does not fit inside it.
  explicit ZipArchive(const std::string& path);
  ~ZipArchive();

  const std::string& path() const { return path_; }
  const std::vector<Entry>& entries() const { return entries_; }
  // The entry named `name`, or null.
  const Entry* find(const std::string& name) const;

  // The entry's bytes, inflated if deflated, checked against its CRC-32.
  std::vector<unsigned char> read(const Entry& entry) const;
  // A stored entry's bytes where they lie in the mapped file (no copy; CRC-checked at the first
  // call for the entry, as several tensors may view one storage), for tensors copied straight out
  // of the file; null for a deflated entry. release() then drops its pages from the resident set.
  const unsigned char* stored_bytes(const Entry& entry) const;
  void release(const Entry& entry) const;
  // Copies a stored entry's entry.size bytes to `out`, summing its CRC-32 on the way, chunk by chunk
  // while each is in cache: one pass over the file's bytes, where stored_bytes and a copy make two.
  // Throws naming the entry when the sum does not match (`out` then holds unchecked bytes, for the
  // caller to discard). False, copying nothing, for a deflated entry.
  bool copy_stored(const Entry& entry, void* out) const;

  // Throws "zip: 'PATH': entry 'NAME': <what>".
  [[noreturn]] void fail_entry(const Entry& entry, const std::string& what) const;

 private:
  [[noreturn]] void fail(const std::string& what) const;
  // Where the entry's data begin in the file, from its local header (checked against the file).
  uint64_t data_offset(const Entry& entry) const;
  // A stored entry's first byte in the mapped file, its sizes checked (not its CRC).
  const unsigned char* stored_data(const Entry& entry) const;
  void read_directory();

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
  mutable std::vector<bool> verified_;  // per entry: its CRC-32 has been checked
};

// True when the file at `path` begins as a zip archive does ("PK\3\4" or an empty archive's "PK\5\6").
bool looks_like_zip(const std::string& path);

}  // namespace tessera
