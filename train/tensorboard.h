// TensorBoard scalar logging without TensorFlow or protobuf: event files written byte for byte as
// TensorBoard reads them (the layout below, learned from tensorboard's
// summary/writer/record_writer.py and compat/proto/event.proto, summary.proto).
//
// An event file is a sequence of TFRecords, all integers little-endian:
//   uint64 length | uint32 masked_crc32c(length bytes) | data[length] | uint32 masked_crc32c(data)
// where data is a serialized tensorboard.Event. The first event carries file_version
// "brain.Event:2"; each scalar is Event{wall_time (field 1, double), step (2, varint),
// summary (5) = Summary{value (1) = Value{tag (1, string), simple_value (2, float)}}}, the legacy
// form TensorBoard migrates into its scalars plugin (torch.utils.tensorboard writes the same).
// Fields at their proto3 default (step 0) are omitted, as protobuf serializers do.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace tessera::train {

// CRC-32C (Castagnoli): reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF;
// crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
// TFRecord's masked form: ((c >> 15) | (c << 17)) + 0xA282EAD8 (mod 2^32), c = crc32c(data).
uint32_t masked_crc32c(const void* data, size_t size);

// The byte encodings, exposed for tests and other writers.
namespace tfevents {
// Event{wall_time, file_version: "brain.Event:2"}.
std::string file_version_event(double wall_time);
// Event{wall_time, step, summary{value{tag, simple_value}}}.
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
// One TFRecord around `data`.
std::string record(const std::string& data);
}  // namespace tfevents

// Writes one event file, events.out.tfevents.<10-digit unix time>.<hostname>, in `logdir`
// (created if needed; TensorBoard shows each directory of event files as a run). A name already
// taken gets a ".<n>" suffix, so a resumed run adds a file instead of overwriting one. Records are
// buffered and reach the file at the latest at flush() or destruction: flush after each epoch.
class SummaryWriter {
 public:
  explicit SummaryWriter(const std::string& logdir);
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // Logs `value` (stored as float32, TensorBoard's simple_value) under `tag` at `step`; wall_time
  // defaults to now (seconds since the epoch). Tags with '/' are grouped by TensorBoard.
  void add_scalar(const std::string& tag, double value, int64_t step, std::optional<double> wall_time = std::nullopt);
  // Pushes buffered records to the file and the disk (fflush + fsync).
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& bytes);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace tessera::train
