// DataLoader: turns a Dataset + a per-sample Transform into batches, with worker threads that
// prefetch ahead of the consumer, per-epoch shuffling, optional repeated augmentation, and
// corrupt-sample skipping.
//
// Determinism. Everything is a pure function of (seed, epoch, position in the epoch):
//   - the epoch order (epoch_order) is a Fisher-Yates shuffle driven by a Philox stream of
//     (seed, epoch), with repeats > 1 applied on top (see LoaderOptions::repeats);
//   - the sample at position p of the epoch is transformed with SampleRng(seed, epoch, p);
//   - batch b holds positions [b * batch_size, (b + 1) * batch_size).
// So the batches are bit-identical whatever the number of workers (0 = inline in next()), they
// come out in order, and start_epoch(e, k) resumes an interrupted epoch at batch k without
// decoding the k skipped batches.
//
// Corrupt samples. A DataError from Dataset::get or from the transform means the sample cannot be
// used. With strict = true, next() throws it (naming the file) at the batch that holds the sample.
// Otherwise the file is reported once on stderr ("warning: skipping corrupt image PATH: reason"),
// counted in skipped_in_epoch(), and its slot is filled by the rule: the sample at position p that
// fails is replaced by the first readable sample at positions p+1, p+2, ... of the epoch order
// (wrapping around at the end), transformed with position p's random stream. The rule depends only
// on the order and on which files are corrupt, so skipping keeps the batches deterministic. Any
// other exception (a bug, out of memory) propagates from next() at its batch. After an exception
// next() continues with the following batch if called again.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/data/dataset.h"
#include "tessera/data/rng.h"
#include "tessera/data/sample_transform.h"

namespace tessera::data {

// EncodedImage -> float32 [C, H, W] (data/sample_transform.h); every sample of a batch must give
// the same shape. A writer (what create_transform builds) decodes each sample straight into its
// slot of the batch; a transform returning tensors has them copied there.
using Transform = SampleTransform;

// Allocates a batch's host tensors (images float32 [B, C, H, W], labels int64 [B]). The default is
// Tensor::empty on the CPU. This is the hook for pinned host memory: a CUDA build installs an
// allocator returning page-locked CPU tensors, so that the `workers * prefetch` batches in flight
// act as the pinned buffers that let the host->device copy of batch b+1 (cudaMemcpyAsync on a
// side stream) overlap the compute of batch b. Called from worker threads: must be thread-safe.
using BatchAllocator = std::function<Tensor(const Shape& shape, DType dtype)>;

struct LoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  bool drop_last = false;  // drop the last batch when it would be smaller than batch_size
  // Decoding threads (0 decodes inline in next()) and batches in flight per worker; -1 and 0 size
  // them for the machine and the batch (data/loader_sizing.h), resolved in options().
  int workers = -1;
  int prefetch = 0;
  bool feeds_gpu = false;  // the batches go on to a GPU (for the sizing only)
  uint64_t seed = 0;
  // Repeated augmentation (timm's RepeatAugSampler on one process): the epoch order is the
  // shuffled indices with each one repeated `repeats` times in a row, truncated to the dataset
  // size, so an epoch keeps its length, covers the first size/repeats indices of the permutation,
  // and each copy gets its own position and therefore its own augmentation. 0 or 1: off.
  // (timm also rounds the epoch down to a multiple of 256 samples; we keep the dataset size.)
  int repeats = 0;
  bool strict = false;  // a corrupt sample is an error instead of being skipped
  // Data-parallel sharding (data/sampler.h): this process takes rank's share of the epoch order,
  // padded to equal length. Samples keep the random stream of their global position, so the
  // augmentation of a sample does not depend on the number of processes.
  int rank = 0, world_size = 1;
  bool verbose = true;      // print the per-file warnings and the end-of-epoch count on stderr
  BatchAllocator allocate;  // empty: Tensor::empty on the CPU
};

struct Batch {
  Tensor images;        // float32 [B, C, H, W]
  Tensor labels;        // int64 [B]
  int64_t index = 0;    // batch number within the epoch
  int64_t padding = 0;  // trailing samples that only pad the shards to equal length (count them once: not at all)
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, Transform transform, LoaderOptions options);
  ~DataLoader();  // stops and joins the workers, even mid-epoch
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const;
  int64_t samples_per_epoch() const;  // this rank's share of the dataset size (also with repeats)
  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

  // Starts epoch `epoch` (>= 0) at batch skip_batches (0 <= skip_batches <= batches_per_epoch()),
  // stopping whatever the previous epoch still had in flight.
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch of the epoch, in order; nullopt at the end of the epoch. At the end, when
  // samples were skipped and verbose is on, prints "warning: skipped N corrupt image(s) in epoch E".
  std::optional<Batch> next();

  // Seconds next() has spent waiting for batches since the loader was made (blocked on the workers,
  // or decoding inline with workers = 0): the trainer's data-wait fraction.
  double wait_seconds() const { return waited_; }

  // Distinct corrupt samples met so far in this epoch, and their paths (sorted by dataset index).
  int64_t skipped_in_epoch() const;
  std::vector<std::string> skipped_paths() const;

  // Dataset indices in the order epoch `epoch` visits them, over all ranks (the dataset size).
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  struct Run;
  struct Shared;
  void stop();
  Batch make_batch(Run& run, int64_t b) const;
  Tensor allocate_images(const Shape& sample_shape, int64_t count) const;
  // The sample a slot at `position` of the epoch gets (the corrupt-sample rule), handed to `use`
  // with position's random stream; returns its label.
  using SlotUse = std::function<void(const EncodedImage& image, SampleRng& rng, int64_t index)>;
  int64_t load_slot(Run& run, int64_t position, const SlotUse& use) const;
  void worker_loop(Run& run) const;

  std::shared_ptr<const Dataset> dataset_;
  Transform transform_;
  LoaderOptions options_;
  std::unique_ptr<Shared> shared_;  // state shared with the workers across epochs
  std::unique_ptr<Run> run_;        // the current epoch
  double waited_ = 0;               // wait_seconds()
};

}  // namespace tessera::data
