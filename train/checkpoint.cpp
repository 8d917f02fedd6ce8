// Checkpoint pairs in the output folder: saving, linking last/best, pruning, and recovering the
// newest complete pair (layout and crash-safety argument in train/checkpoint.h).
#include "tessera/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tessera/core/atomic_file.h"
#include "tessera/io/safetensors.h"
#include "tessera/io/weights_file.h"
#include "tessera/train/output.h"

namespace tessera::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWeightsExt = ".safetensors";
constexpr const char* kStateExt = ".state.safetensors";
const char* const kReservedKeys[] = {"epoch", "metric", "metric_name", "checkpoint_id"};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string numbered_stem(int64_t epoch) { return "checkpoint-" + std::to_string(epoch); }

// The epoch of "checkpoint-<digits><ext>", nullopt for any other name. A weights name never
// matches the state extension: "checkpoint-3.state" is not all digits.
std::optional<int64_t> numbered_epoch(const std::string& name, const std::string& ext) {
  const std::string prefix = "checkpoint-";
  if (name.rfind(prefix, 0) != 0 || !ends_with(name, ext)) return std::nullopt;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - ext.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return std::nullopt;
  return std::stoll(digits);
}

// Epochs of the numbered files with extension `ext` in `dir`, ascending.
std::vector<int64_t> list_epochs(const std::string& dir, const std::string& ext) {
  std::vector<int64_t> epochs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (auto e = numbered_epoch(it->path().filename().string(), ext)) epochs.push_back(*e);
  std::sort(epochs.begin(), epochs.end());
  return epochs;
}

std::string new_checkpoint_id() {
  std::random_device rd;
  const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  const uint64_t id =
      ((static_cast<uint64_t>(rd()) << 32) | rd()) ^ (t * 0x9E3779B97F4A7C15ull) ^ static_cast<uint64_t>(::getpid());
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

// The checkpoint_id of a file, "" when it is missing, unreadable or has none.
std::string checkpoint_id_of(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  try {
    const auto meta = open_safetensors(path).metadata();
    auto it = meta.find("checkpoint_id");
    return it == meta.end() ? "" : it->second;
  } catch (const Error&) { return ""; }
}

bool complete_pair(const std::string& weights, const std::string& state) {
  const std::string id = checkpoint_id_of(weights);
  return !id.empty() && id == checkpoint_id_of(state);
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the entries are in place already
  ::fsync(fd);
  ::close(fd);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in, "checkpoint: cannot read '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Makes `dst` name the same bytes as `src`, atomically: a hard link under a temporary name renamed
// over dst, or, where the file system has no hard links, an atomic copy.
void link_or_copy(const std::string& src, const std::string& dst) {
  const std::string tmp = dst + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::link(src.c_str(), tmp.c_str()) != 0) {
    write_file_atomically(dst, read_file(src));
    return;
  }
  if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(detail::concat("checkpoint: cannot rename '", tmp, "' to '", dst, "': ", std::strerror(err)));
  }
  sync_directory(fs::path(dst).parent_path().string());
}

void remove_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw Error(detail::concat("checkpoint: cannot remove '", path, "': ", std::strerror(errno)));
}

std::string base_of(const std::string& path) {
  if (ends_with(path, kStateExt)) return path.substr(0, path.size() - std::strlen(kStateExt));
  if (ends_with(path, kWeightsExt)) return path.substr(0, path.size() - std::strlen(kWeightsExt));
  throw Error("load_checkpoint: '" + path + "' is not a checkpoint file (expected <name>" + kWeightsExt + " or <name>" +
              kStateExt + ")");
}

int64_t parse_epoch(const std::map<std::string, std::string>& meta, const std::string& path) {
  auto it = meta.find("epoch");
  TS_CHECK(it != meta.end(), "load_checkpoint: '", path, "' has no 'epoch' metadata (not written by CheckpointSaver)");
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw Error("load_checkpoint: '" + path + "': invalid epoch '" + it->second + "'");
  }
}

double parse_metric(const std::map<std::string, std::string>& meta) {
  auto it = meta.find("metric");
  if (it == meta.end()) return NAN;
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    return NAN;  // "nan" is read by stod; anything else means no usable metric
  }
}

}  // namespace

CheckpointSaver::CheckpointSaver(std::string dir, int keep, std::string metric_name, bool higher_is_better)
    : dir_(std::move(dir)), keep_(keep), metric_name_(std::move(metric_name)), higher_is_better_(higher_is_better) {
  TS_CHECK(keep_ >= 1, "CheckpointSaver: keep must be >= 1, got ", keep_);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  TS_CHECK(!ec, "CheckpointSaver: cannot create '", dir_, "': ", ec.message());
  // A run killed mid-write leaves temporaries (of args.yaml, summary.csv, checkpoints) nobody renames.
  remove_abandoned_temporaries(dir_);
  if (complete_pair(weights_path("model_best"), state_path("model_best"))) {
    const auto meta = open_safetensors(state_path("model_best")).metadata();
    auto it = meta.find("metric_name");
    if (it != meta.end() && it->second == metric_name_) {
      best_epoch_ = parse_epoch(meta, state_path("model_best"));
      best_metric_ = parse_metric(meta);
    }
  }
}

std::string CheckpointSaver::weights_path(const std::string& stem) const {
  return (fs::path(dir_) / (stem + kWeightsExt)).string();
}

std::string CheckpointSaver::state_path(const std::string& stem) const {
  return (fs::path(dir_) / (stem + kStateExt)).string();
}

std::vector<int64_t> CheckpointSaver::saved_epochs() const { return list_epochs(dir_, kWeightsExt); }

bool CheckpointSaver::improves(double metric) const {
  if (!best_epoch_) return true;
  if (std::isnan(metric)) return false;
  if (std::isnan(best_metric_)) return true;
  return higher_is_better_ ? metric > best_metric_ : metric < best_metric_;
}

// Weights first: a state file without its weights is an incomplete pair, never the reverse.
void CheckpointSaver::remove_pair(int64_t epoch) const {
  remove_file(weights_path(numbered_stem(epoch)));
  remove_file(state_path(numbered_stem(epoch)));
}

void CheckpointSaver::prune(int64_t current_epoch) const {
  std::vector<int64_t> kept;
  for (int64_t e : saved_epochs()) {
    if (e > current_epoch) remove_pair(e);
    else kept.push_back(e);
  }
  for (size_t i = 0; i + static_cast<size_t>(keep_) < kept.size(); ++i) remove_pair(kept[i]);
  // State files whose weights never arrived (a save that died in between).
  const std::vector<int64_t> weights = saved_epochs();
  for (int64_t e : list_epochs(dir_, kStateExt))
    if (!std::binary_search(weights.begin(), weights.end(), e)) remove_file(state_path(numbered_stem(e)));
  sync_directory(dir_);
}

bool CheckpointSaver::save(int64_t epoch, double metric, const nn::NamedTensors& model_weights,
                           const nn::NamedTensors& train_state, const std::map<std::string, std::string>& metadata) {
  TS_CHECK(epoch >= 0, "CheckpointSaver::save: epoch must be >= 0, got ", epoch);
  for (const char* key : kReservedKeys)
    TS_CHECK(!metadata.count(key), "CheckpointSaver::save: metadata key '", key,
             "' is reserved for the saver (epoch, metric, metric_name, checkpoint_id)");
  for (int64_t e : saved_epochs())  // a resumed run supersedes what an earlier run saved later
    if (e > epoch) remove_pair(e);

  const std::string id = new_checkpoint_id(), stem = numbered_stem(epoch);
  std::map<std::string, std::string> state_meta = metadata;
  state_meta["epoch"] = std::to_string(epoch);
  state_meta["metric"] = python_float(metric);
  state_meta["metric_name"] = metric_name_;
  state_meta["checkpoint_id"] = id;
  save_safetensors(state_path(stem), train_state, state_meta);
  std::map<std::string, std::string> weights_meta = {
      {"format", "pt"}, {"epoch", std::to_string(epoch)}, {"checkpoint_id", id}};
  if (const auto it = metadata.find(kModelFileKey); it != metadata.end()) weights_meta[kModelFileKey] = it->second;
  save_safetensors(weights_path(stem), model_weights, weights_meta);

  link_or_copy(state_path(stem), state_path("last"));
  link_or_copy(weights_path(stem), weights_path("last"));
  // A best from this epoch or later belongs to a superseded run.
  const bool best = improves(metric) || *best_epoch_ >= epoch;
  if (best) {
    link_or_copy(state_path(stem), state_path("model_best"));
    link_or_copy(weights_path(stem), weights_path("model_best"));
    best_epoch_ = epoch;
    best_metric_ = metric;
  }
  prune(epoch);
  return best;
}

std::string read_model_file_metadata(const std::string& path) {
  const std::string suffix = ".safetensors";
  if (path.size() < suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0 ||
      !std::filesystem::is_regular_file(path))
    return "";
  const std::map<std::string, std::string> meta = open_safetensors(path).metadata();  // a copy: the reader goes
  const auto it = meta.find(kModelFileKey);
  return it == meta.end() ? std::string() : it->second;
}

std::optional<std::string> find_resume(const std::string& dir) {
  const auto path = [&](const std::string& stem, const char* ext) { return (fs::path(dir) / (stem + ext)).string(); };
  const std::vector<int64_t> epochs = list_epochs(dir, kWeightsExt);
  for (auto it = epochs.rbegin(); it != epochs.rend(); ++it) {
    const std::string stem = numbered_stem(*it);
    if (complete_pair(path(stem, kWeightsExt), path(stem, kStateExt))) return path(stem, kWeightsExt);
  }
  if (complete_pair(path("last", kWeightsExt), path("last", kStateExt))) return path("last", kWeightsExt);
  return std::nullopt;
}

CheckpointData load_checkpoint(const std::string& path) {
  const std::string base = base_of(path);
  CheckpointData out;
  out.weights_path = base + kWeightsExt;
  out.state_path = base + kStateExt;
  std::error_code ec;
  for (const std::string& p : {out.weights_path, out.state_path})
    TS_CHECK(fs::exists(p, ec), "load_checkpoint: '", p,
             "' does not exist (a checkpoint is a pair: ", fs::path(out.weights_path).filename().string(), " and ",
             fs::path(out.state_path).filename().string(), ")");
  const SafetensorsReader weights = open_safetensors(out.weights_path);
  const SafetensorsReader state = open_safetensors(out.state_path);
  const auto id_of = [](const SafetensorsReader& r) {
    auto it = r.metadata().find("checkpoint_id");
    return it == r.metadata().end() ? std::string() : it->second;
  };
  TS_CHECK(!id_of(weights).empty() && id_of(weights) == id_of(state), "load_checkpoint: '", out.weights_path, "' and '",
           out.state_path, "' are not from the same save (checkpoint_id '", id_of(weights), "' vs '", id_of(state),
           "'); the save was interrupted - resume from another checkpoint");
  out.metadata = state.metadata();
  out.epoch = parse_epoch(out.metadata, out.state_path);
  out.metric = parse_metric(out.metadata);
  for (const std::string& name : weights.names()) out.weights.emplace_back(name, weights.load(name));
  for (const std::string& name : state.names()) out.state.emplace_back(name, state.load(name));
  return out;
}

nn::NamedTensors load_initial_weights(const std::string& path) {
  std::error_code ec;
  TS_CHECK(fs::exists(path, ec), "--initial-checkpoint: '", path, "' does not exist");
  if (fs::is_directory(path, ec)) {
    const std::optional<std::string> found = find_resume(path);
    TS_CHECK(found.has_value(), "--initial-checkpoint: no complete checkpoint in ", path);
    return load_checkpoint(*found).weights;
  }
  const std::string state_ext = kStateExt;
  if (path.size() > state_ext.size() && path.compare(path.size() - state_ext.size(), state_ext.size(), state_ext) == 0)
    return load_checkpoint(path).weights;
  return load_weights_file(path);
}

int64_t state_scalar(const CheckpointData& checkpoint, const std::string& key) {
  for (const auto& [name, t] : checkpoint.state) {
    if (name != key) continue;
    TS_CHECK(t.dtype() == DType::Int64 && t.numel() == 1, "load_checkpoint: '", checkpoint.state_path, "': '", key,
             "' must be one int64, got ", dtype_name(t.dtype()), t.shape());
    return t.to_vector<int64_t>()[0];
  }
  throw Error("load_checkpoint: '" + checkpoint.state_path + "' has no '" + key +
              "' entry (not a Tessera training checkpoint?)");
}

nn::NamedTensors with_prefix(const std::string& prefix, const nn::NamedTensors& tensors) {
  nn::NamedTensors out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) out.emplace_back(prefix + name, t);
  return out;
}

nn::NamedTensors strip_prefix(const std::string& prefix, const nn::NamedTensors& tensors) {
  nn::NamedTensors out;
  for (const auto& [name, t] : tensors)
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

}  // namespace tessera::train
