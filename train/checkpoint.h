// Checkpoints of a training run in its output folder, after timm's CheckpointSaver
// (timm/utils/checkpoint_saver.py) with safetensors instead of pickles:
//
//   checkpoint-<epoch>.safetensors         the model weights alone, under timm's state_dict keys
//                                          (timm and safetensors.torch.load_file read it);
//                                          metadata format=pt, epoch, checkpoint_id, and the
//                                          caller's model_file (the model's file, if it has one)
//   checkpoint-<epoch>.state.safetensors   the rest of the training state (optimizer, EMA, RNG,
//                                          loader tensors, under the caller's names) and the
//                                          caller's metadata strings plus epoch, metric,
//                                          metric_name and checkpoint_id
//   last.safetensors, last.state.safetensors              the newest pair
//   model_best.safetensors, model_best.state.safetensors  the pair with the best metric
//
// last.* and model_best.* are hard links to the numbered files (copies where the file system has
// no hard links), so pruning never removes their data. Kept: the `keep` newest numbered pairs
// (timm --checkpoint-hist keeps the best K by metric instead; here the last K), plus last and best.
//
// Crash safety: every file appears atomically (written under a temporary name, fsync'ed, renamed;
// links made under a temporary name and renamed), the state file of a pair before its weights,
// and both files of a save carry the same random checkpoint_id. A pair is complete when both
// files exist with equal ids, so a process killed at any point leaves the previous complete pairs
// intact, and find_resume() recovers the newest complete pair from the directory listing alone.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::train {

// The weights and state of one checkpoint pair.
struct CheckpointData {
  std::string weights_path, state_path;
  int64_t epoch = 0;
  double metric = 0;  // NaN when the run had none
  nn::NamedTensors weights;
  nn::NamedTensors state;
  std::map<std::string, std::string> metadata;  // of the state file: the caller's keys and the saver's
};

class CheckpointSaver {
 public:
  // `dir` is created if needed. keep >= 1 numbered pairs are kept. The best metric so far is read
  // back from an existing model_best pair (resume), when its metric_name matches.
  explicit CheckpointSaver(std::string dir, int keep = 10, std::string metric_name = "top1",
                           bool higher_is_better = true);

  // Saves the pair for `epoch`, updates last.* (and model_best.* when `metric` improves on the
  // best; a NaN metric never does, except as the first), then prunes. Numbered pairs of epochs
  // after `epoch` are removed first: they belong to a run superseded by this resumed one.
  // `metadata` may not use the saver's keys (epoch, metric, metric_name, checkpoint_id). Its
  // kModelFileKey entry (the model's file, models/model_file.h) goes into the weights file too, so
  // that the weights alone rebuild their model (read_model_file_metadata).
  // Returns whether this save became the best.
  bool save(int64_t epoch, double metric, const nn::NamedTensors& model_weights, const nn::NamedTensors& train_state,
            const std::map<std::string, std::string>& metadata = {});

  const std::string& dir() const { return dir_; }
  std::optional<int64_t> best_epoch() const { return best_epoch_; }
  double best_metric() const { return best_metric_; }
  // Epochs of the numbered weights files present, ascending (read from the directory).
  std::vector<int64_t> saved_epochs() const;

  std::string weights_path(const std::string& stem) const;  // <dir>/<stem>.safetensors
  std::string state_path(const std::string& stem) const;    // <dir>/<stem>.state.safetensors

 private:
  bool improves(double metric) const;
  void remove_pair(int64_t epoch) const;
  void prune(int64_t current_epoch) const;

  std::string dir_;
  int keep_;
  std::string metric_name_;
  bool higher_is_better_;
  std::optional<int64_t> best_epoch_;
  double best_metric_ = 0;
};

// The metadata key of a checkpoint's model file: the text of Model::model_file().
inline constexpr const char* kModelFileKey = "model_file";
// The model file recorded in a .safetensors file's metadata (a checkpoint's weights or state
// file), or "" when it has none (an older checkpoint, other weights, not a safetensors file).
std::string read_model_file_metadata(const std::string& path);

// The weights file of the newest complete pair in `dir` (the highest numbered one, else last),
// or nullopt when there is none.
std::optional<std::string> find_resume(const std::string& dir);

// Loads a pair given either of its files (x.safetensors or x.state.safetensors). Errors name the
// file: missing or unreadable files, a weights file without a state file, or two files of
// different saves (checkpoint_id mismatch).
CheckpointData load_checkpoint(const std::string& path);

// The weights of an --initial-checkpoint (timm's: the model starts from them, nothing else of a
// run is restored): a run folder means its newest complete checkpoint, a checkpoint's state file
// its weights file, and any other path a file of weights: a .safetensors, or a PyTorch checkpoint
// (.pth / .bin, io/torch_checkpoint.h). Errors name the path.
nn::NamedTensors load_initial_weights(const std::string& path);

// The int64 scalar stored under `key` in the state file (the trainer's "rng.seed",
// "trainer.global_step", ...). Errors name the state file and the key: missing, or not one int64.
int64_t state_scalar(const CheckpointData& checkpoint, const std::string& key);

// Prefixes every key ("optimizer." + key): how several components share one state file.
nn::NamedTensors with_prefix(const std::string& prefix, const nn::NamedTensors& tensors);
// The entries whose key starts with `prefix`, with the prefix removed.
nn::NamedTensors strip_prefix(const std::string& prefix, const nn::NamedTensors& tensors);

}  // namespace tessera::train
