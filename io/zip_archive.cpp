// The zip reader; the format's rules and the checks are in io/zip_archive.h.
#include "tessera/io/zip_archive.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>

#include "tessera/core/error.h"
#include "tessera/io/mapped_file.h"

namespace tessera {

namespace {

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEnd = 0x06054b50;
constexpr uint32_t kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr uint64_t kMaxDeflateRatio = 1032;  // a deflate stream expands its input at most this much
constexpr uint64_t kMaxEntries = 1 << 20;

// Little-endian fields at p (the format's byte order; bounds are checked by the callers).
uint64_t le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

uint32_t crc_of(const unsigned char* p, uint64_t n) { return libdeflate_crc32(0, p, static_cast<size_t>(n)); }

constexpr const char* kCrcMismatch = "its bytes do not match its CRC-32 (the file is damaged)";

}  // namespace

bool looks_like_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && magic[0] == 'P' && magic[1] == 'K' &&
         ((magic[2] == 3 && magic[3] == 4) || (magic[2] == 5 && magic[3] == 6));
}

ZipArchive::ZipArchive(const std::string& path) : path_(path), file_(std::make_unique<MappedFile>(path, "zip")) {
  read_directory();
}

ZipArchive::~ZipArchive() = default;

void ZipArchive::fail(const std::string& what) const { throw Error(detail::concat("zip: '", path_, "': ", what)); }

void ZipArchive::fail_entry(const Entry& entry, const std::string& what) const {
  fail(detail::concat("entry '", entry.name, "': ", what));
}

void ZipArchive::read_directory() {
  const unsigned char* f = file_->data();
  const uint64_t size = file_->size();
  // The end record: 22 bytes plus a comment of at most 65535, so it starts in the last 65557.
  if (size < 22) fail(detail::concat("the file is ", size, " bytes, too short for a zip archive"));
  uint64_t end = size - 22;
  const uint64_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  while (!(le(f + end, 4) == kEnd && end + 22 + le(f + end + 20, 2) == size)) {
    if (end == lowest) fail("no end of central directory record: not a zip archive, or truncated");
    --end;
  }
  uint64_t count = le(f + end + 10, 2), dir_size = le(f + end + 12, 4), dir_offset = le(f + end + 16, 4);
  if (le(f + end + 4, 2) != 0 || le(f + end + 6, 2) != 0) fail("archives split over several disks are not supported");
  // Zip64: the locator sits right before the end record and points at the zip64 end record.
  if (end >= 20 && le(f + end - 20, 4) == kZip64Locator) {
    const uint64_t z = le(f + end - 12, 8);
    if (z > end - 20 || end - 20 - z < 56 || le(f + z, 4) != kZip64End)
      fail("the zip64 end of central directory record is missing or out of place");
    count = le(f + z + 32, 8), dir_size = le(f + z + 40, 8), dir_offset = le(f + z + 48, 8);
  }
  if (dir_offset > size || dir_size > size - dir_offset)
    fail(detail::concat("the central directory (", dir_size, " bytes at ", dir_offset, ") lies outside the ", size,
                        "-byte file"));
  if (count > kMaxEntries) fail(detail::concat("the archive claims ", count, " entries (at most ", kMaxEntries, ")"));
  const unsigned char* p = f + dir_offset;
  const unsigned char* dir_end = p + dir_size;
  entries_.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    if (dir_end - p < 46 || le(p, 4) != kCentralHeader)
      fail(detail::concat("central directory entry ", i, " of ", count, " is missing or damaged"));
    Entry e;
    e.flags = static_cast<uint16_t>(le(p + 8, 2));
    e.method = static_cast<uint16_t>(le(p + 10, 2));
    e.crc32 = static_cast<uint32_t>(le(p + 16, 4));
    e.compressed_size = le(p + 20, 4);
    e.size = le(p + 24, 4);
    const uint64_t name_len = le(p + 28, 2), extra_len = le(p + 30, 2), comment_len = le(p + 32, 2);
    e.local_header_offset = le(p + 42, 4);
    if (static_cast<uint64_t>(dir_end - p) < 46 + name_len + extra_len + comment_len)
      fail(detail::concat("central directory entry ", i, " runs past the directory's end"));
    e.name.assign(reinterpret_cast<const char*>(p + 46), name_len);
    // The zip64 extra field holds, in this order, each 32-bit field that is saturated.
    for (const unsigned char *x = p + 46 + name_len, *x_end = x + extra_len; x_end - x >= 4;) {
      const uint64_t id = le(x, 2), len = le(x + 2, 2);
      if (static_cast<uint64_t>(x_end - x - 4) < len) fail_entry(e, "an extra field runs past its header");
      if (id == 1) {
        const unsigned char *v = x + 4, *v_end = v + len;
        const auto take = [&](uint64_t& field) {
          if (field != 0xFFFFFFFFu) return;
          if (v_end - v < 8) fail_entry(e, "the zip64 extra field is too short");
          field = le(v, 8);
          v += 8;
        };
        take(e.size);
        take(e.compressed_size);
        take(e.local_header_offset);
      }
      x += 4 + len;
    }
    if (!index_.emplace(e.name, entries_.size()).second) fail_entry(e, "appears twice in the central directory");
    entries_.push_back(std::move(e));
    p += 46 + name_len + extra_len + comment_len;
  }
  verified_.assign(entries_.size(), false);
}

const ZipArchive::Entry* ZipArchive::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

uint64_t ZipArchive::data_offset(const Entry& e) const {
  const unsigned char* f = file_->data();
  const uint64_t size = file_->size();
  if (e.flags & 1) fail_entry(e, "is encrypted");
  if (e.local_header_offset > size || size - e.local_header_offset < 30 ||
      le(f + e.local_header_offset, 4) != kLocalHeader)
    fail_entry(e, detail::concat("its local header at ", e.local_header_offset, " is missing or outside the file"));
  const uint64_t start =
      e.local_header_offset + 30 + le(f + e.local_header_offset + 26, 2) + le(f + e.local_header_offset + 28, 2);
  if (start > size || e.compressed_size > size - start)
    fail_entry(e, detail::concat("its ", e.compressed_size, " bytes at ", start, " run past the end of the ", size,
                                 "-byte file (truncated?)"));
  return start;
}

const unsigned char* ZipArchive::stored_data(const Entry& e) const {
  const uint64_t start = data_offset(e);
  if (e.size != e.compressed_size)
    fail_entry(e, detail::concat("stored, but its sizes differ (", e.compressed_size, " and ", e.size, ")"));
  return file_->data() + start;
}

const unsigned char* ZipArchive::stored_bytes(const Entry& e) const {
  if (e.method != 0) return nullptr;
  const unsigned char* p = stored_data(e);
  const size_t at = static_cast<size_t>(&e - entries_.data());
  if (!verified_[at]) {
    if (crc_of(p, e.size) != e.crc32) fail_entry(e, kCrcMismatch);
    verified_[at] = true;
  }
  return p;
}

bool ZipArchive::copy_stored(const Entry& e, void* out) const {
  if (e.method != 0) return false;
  const unsigned char* p = stored_data(e);
  auto* dst = static_cast<unsigned char*>(out);
  constexpr uint64_t kChunk = 128 * 1024;  // copied, then summed while it is still in L2
  uint32_t crc = 0;
  for (uint64_t at = 0; at < e.size; at += kChunk) {
    const uint64_t n = std::min(kChunk, e.size - at);
    std::memcpy(dst + at, p + at, n);
    crc = libdeflate_crc32(crc, dst + at, static_cast<size_t>(n));
  }
  if (crc != e.crc32) fail_entry(e, kCrcMismatch);
  verified_[static_cast<size_t>(&e - entries_.data())] = true;
  return true;
}

void ZipArchive::release(const Entry& e) const {
  if (e.method == 0) MappedFile::release_pages(file_->data() + data_offset(e), e.size);
}

std::vector<unsigned char> ZipArchive::read(const Entry& e) const {
  if (const unsigned char* p = stored_bytes(e)) return {p, p + e.size};
  if (e.method != 8)
    fail_entry(e, detail::concat("compression method ", e.method, " is not supported (only stored and deflated)"));
  const uint64_t start = data_offset(e);
  if (e.size > e.compressed_size * kMaxDeflateRatio + 1024)
    fail_entry(e, detail::concat("claims ", e.size, " bytes from ", e.compressed_size,
                                 " compressed, more than deflate can produce: refused (a zip bomb?)"));
  std::vector<unsigned char> out(e.size);
  unsigned char none;  // a valid pointer for an empty entry
  const std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)> inflater(
      libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
  if (!inflater) fail_entry(e, "libdeflate could not allocate a decompressor");
  // The claimed size is the room given: a longer stream fails (insufficient space), a shorter one
  // reports what it produced.
  size_t produced = 0;
  const libdeflate_result result =
      libdeflate_deflate_decompress(inflater.get(), file_->data() + start, e.compressed_size,
                                    out.empty() ? &none : out.data(), out.size(), &produced);
  if (result != LIBDEFLATE_SUCCESS || produced != e.size)
    fail_entry(e,
               detail::concat("its deflated data are damaged or do not inflate to the ", e.size, " bytes it claims"));
  if (crc_of(out.data(), out.size()) != e.crc32) fail_entry(e, kCrcMismatch);
  return out;
}

}  // namespace tessera
