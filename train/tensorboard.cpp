// TensorBoard event-file writer: CRC-32C, a minimal protobuf encoder for the Event fields of a
// scalar, TFRecord framing, and the file (format in train/tensorboard.h).
#include "tessera/train/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"

namespace tessera::train {

namespace {

// Byte-at-a-time table for the reflected Castagnoli polynomial.
constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

// ---- protobuf wire format (only what Event needs) ----------------------------------------------

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <class T>
void put_le(std::string& out, T v) {  // fixed-width little-endian
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(bytes, bytes + sizeof(T));
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }

void put_bytes_field(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event.wall_time (1) and Event.step (2), omitted at their default 0.
std::string event_header(double wall_time, int64_t step) {
  std::string out;
  if (wall_time != 0.0) {
    put_key(out, 1, kFixed64);
    put_le(out, wall_time);
  }
  if (step != 0) {
    put_key(out, 2, kVarint);
    put_varint(out, static_cast<uint64_t>(step));  // int64: negative values take ten bytes
  }
  return out;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = kCrcTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

namespace tfevents {

std::string file_version_event(double wall_time) {
  std::string out = event_header(wall_time, 0);
  put_bytes_field(out, 3, "brain.Event:2");
  return out;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;  // Summary.Value
  put_bytes_field(v, 1, tag);
  put_key(v, 2, kFixed32);
  put_le(v, value);
  std::string summary;
  put_bytes_field(summary, 1, v);
  std::string out = event_header(wall_time, step);
  put_bytes_field(out, 5, summary);
  return out;
}

std::string record(const std::string& data) {
  std::string out;
  put_le(out, static_cast<uint64_t>(data.size()));
  put_le(out, masked_crc32c(out.data(), 8));
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()));
  return out;
}

}  // namespace tfevents

SummaryWriter::SummaryWriter(const std::string& logdir) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  TS_CHECK(!ec, "SummaryWriter: cannot create the log directory '", logdir, "': ", ec.message());
  const double wall = now_seconds();
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%010lld", static_cast<long long>(wall));
  const std::string base =
      (std::filesystem::path(logdir) / ("events.out.tfevents." + std::string(stamp) + "." + hostname())).string();
  for (int n = 0; !file_; ++n) {
    path_ = n == 0 ? base : base + "." + std::to_string(n);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      TS_CHECK(errno == EEXIST && n < 1000, "SummaryWriter: cannot create '", path_, "': ", std::strerror(errno));
      continue;
    }
    file_ = ::fdopen(fd, "wb");
    if (!file_) {
      const int err = errno;
      ::close(fd);
      throw Error(detail::concat("SummaryWriter: cannot open '", path_, "': ", std::strerror(err)));
    }
  }
  write(tfevents::record(tfevents::file_version_event(wall)));
  flush();
}

SummaryWriter::~SummaryWriter() {
  if (!file_) return;
  std::fflush(file_);
  ::fsync(::fileno(file_));
  std::fclose(file_);
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step, std::optional<double> wall_time) {
  TS_CHECK(!tag.empty(), "SummaryWriter::add_scalar: the tag is empty");
  write(tfevents::record(
      tfevents::scalar_event(wall_time.value_or(now_seconds()), step, tag, static_cast<float>(value))));
}

void SummaryWriter::write(const std::string& bytes) {
  TS_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), file_) == bytes.size(), "SummaryWriter: cannot write to '", path_,
           "': ", std::strerror(errno));
}

void SummaryWriter::flush() {
  TS_CHECK(std::fflush(file_) == 0, "SummaryWriter: cannot write to '", path_, "': ", std::strerror(errno));
  TS_CHECK(::fsync(::fileno(file_)) == 0 || errno == EINVAL, "SummaryWriter: cannot sync '", path_,
           "': ", std::strerror(errno));
}

}  // namespace tessera::train
