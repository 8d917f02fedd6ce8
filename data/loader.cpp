// DataLoader (see loader.h for the determinism and corrupt-sample rules).
//
// Threads: each epoch spawns up to `workers` std::threads. A worker claims the next unclaimed
// batch number while it is fewer than workers * prefetch batches ahead of the consumer (the
// bounded queue), builds the whole batch into one contiguous tensor (a writing transform decodes
// each sample straight into its slot; a returning one's tensor is copied there), and files the result,
// or the exception it met, under its batch number. next() waits for the batch it is due to deliver,
// so batches come out in order whatever thread finished first. stop() raises a flag that workers
// check between samples and joins them.
#include "tessera/data/loader.h"

#include "tessera/core/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <unordered_set>

#include "tessera/autograd/grad_mode.h"
#include "tessera/data/loader_sizing.h"
#include "tessera/data/sampler.h"

namespace tessera::data {

namespace {

// The Philox stream of the epoch permutation: a sample index no epoch reaches (SampleRng streams
// are 2^24 blocks apart, positions stay far below 2^40).
constexpr uint64_t kOrderStream = (uint64_t{1} << 40) - 1;

// Give up after this many consecutive unreadable samples: the dataset is not in a format we read,
// and scanning on would be quadratic in its size.
constexpr int64_t kMaxConsecutiveFailures = 1000;

// "PATH: reason", whether or not the decoder's message already starts with the path.
std::string with_path(const std::string& message, const std::string& path) {
  return message.find(path) != std::string::npos ? message : path + ": " + message;
}

struct Result {
  Batch batch;
  std::exception_ptr error;
};

}  // namespace

// Across epochs: which dataset items are known to be unreadable (each one is warned about once).
struct DataLoader::Shared {
  std::mutex mu;
  std::unordered_set<int64_t> corrupt;
};

// One epoch in progress.
struct DataLoader::Run {
  int64_t epoch = 0;
  std::vector<int64_t> order;      // this rank's dataset indices
  std::vector<int64_t> positions;  // their global positions (data/sampler.h)
  int64_t size_before_padding = 0;
  int64_t num_batches = 0;
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards everything below
  std::condition_variable work_cv, ready_cv;
  int64_t next_claim = 0, next_deliver = 0;
  std::map<int64_t, Result> done;
  std::set<int64_t> skipped;  // dataset indices found unreadable in this epoch
  std::vector<std::thread> threads;
  bool finished = false;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, Transform transform, LoaderOptions options)
    : dataset_(std::move(dataset)),
      transform_(std::move(transform)),
      options_(std::move(options)),
      shared_(std::make_unique<Shared>()) {
  TS_CHECK(dataset_ != nullptr, "DataLoader: no dataset");
  TS_CHECK(dataset_->size() > 0, "DataLoader: the dataset is empty");
  TS_CHECK(static_cast<bool>(transform_), "DataLoader: no transform (Image -> float32 [C, H, W])");
  TS_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ", options_.batch_size);
  TS_CHECK(options_.workers >= -1, "DataLoader: workers must be >= 0, or -1 to size them for the machine, got ",
           options_.workers);
  TS_CHECK(options_.prefetch >= 0, "DataLoader: prefetch must be >= 1, or 0 to size it for the machine, got ",
           options_.prefetch);
  TS_CHECK(options_.repeats >= 0, "DataLoader: repeats must be >= 0, got ", options_.repeats);
  TS_CHECK(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size, "DataLoader: rank ",
           options_.rank, " is not in [0, world_size ", options_.world_size, ")");
  if (options_.workers < 0) options_.workers = auto_workers(usable_cores(), options_.feeds_gpu);
  if (options_.prefetch == 0) {
    // A writing transform says its samples' size; a returning one's is taken as 224 px RGB.
    const int64_t sample_floats = transform_.writes_in_place() ? numel_of(transform_.output_shape()) : 3 * 224 * 224;
    options_.prefetch = auto_prefetch(options_.workers, options_.batch_size * sample_floats * int64_t{4});
  }
  if (!options_.allocate) options_.allocate = [](const Shape& s, DType dt) { return Tensor::empty(s, dt); };
}

DataLoader::~DataLoader() { stop(); }

int64_t DataLoader::samples_per_epoch() const {
  return (dataset_->size() + options_.world_size - 1) / options_.world_size;
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = samples_per_epoch(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  TS_CHECK(epoch >= 0, "DataLoader: epoch must be >= 0, got ", epoch);
  const int64_t n = dataset_->size();
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (options_.shuffle) {  // Fisher-Yates: swap each position with a uniform earlier-or-same one
    SampleRng rng(options_.seed, static_cast<uint64_t>(epoch), kOrderStream);
    for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.randint(0, i)]);
  }
  if (options_.repeats <= 1) return perm;
  std::vector<int64_t> order(n);  // repeat_interleave, truncated to the epoch length
  for (int64_t k = 0; k < n; ++k) order[k] = perm[k / options_.repeats];
  return order;
}

void DataLoader::stop() {
  if (!run_) return;
  {
    std::lock_guard<std::mutex> lock(run_->mu);
    run_->stop = true;
  }
  run_->work_cv.notify_all();
  for (auto& t : run_->threads) t.join();
  run_->threads.clear();
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  stop();
  auto run = std::make_unique<Run>();
  run->epoch = epoch;
  Shard shard = shard_order(epoch_order(epoch), options_.rank, options_.world_size);
  run->order = std::move(shard.indices);
  run->positions = std::move(shard.positions);
  run->size_before_padding = shard.size_before_padding;
  run->num_batches = batches_per_epoch();
  TS_CHECK(skip_batches >= 0 && skip_batches <= run->num_batches, "DataLoader::start_epoch: skip_batches ",
           skip_batches, " out of range [0, ", run->num_batches, "]");
  run->next_claim = run->next_deliver = skip_batches;
  run_ = std::move(run);
  const int64_t threads = std::min<int64_t>(options_.workers, run_->num_batches - skip_batches);
  for (int64_t i = 0; i < threads; ++i) run_->threads.emplace_back([this, r = run_.get()] { worker_loop(*r); });
}

int64_t DataLoader::load_slot(Run& run, int64_t position, const SlotUse& use) const {
  const int64_t n = static_cast<int64_t>(run.order.size());
  std::string last_error;
  for (int64_t k = 0; k < std::min(n, kMaxConsecutiveFailures); ++k) {
    const int64_t index = run.order[(position + k) % n];
    bool known_corrupt;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      known_corrupt = shared_->corrupt.count(index) > 0;
    }
    if (!known_corrupt || options_.strict) {
      try {
        EncodedSample sample = dataset_->get_encoded(index);
        SampleRng rng(options_.seed, static_cast<uint64_t>(run.epoch),
                      static_cast<uint64_t>(run.positions[static_cast<size_t>(position)]));
        use(sample.image, rng, index);
        return sample.label;
      } catch (const DataError& e) {
        last_error = with_path(e.what(), dataset_->describe(index));
        if (options_.strict) throw DataError(last_error);
        std::lock_guard<std::mutex> lock(shared_->mu);
        if (shared_->corrupt.insert(index).second && options_.verbose)
          std::fprintf(stderr, "warning: skipping corrupt image %s\n", last_error.c_str());
      }
    }
    std::lock_guard<std::mutex> lock(run.mu);
    run.skipped.insert(index);
  }
  throw DataError(detail::concat("DataLoader: ", std::min(n, kMaxConsecutiveFailures), " consecutive samples of epoch ",
                                 run.epoch, " from position ", position,
                                 " could not be read; is the dataset in a format we can decode?",
                                 last_error.empty() ? "" : " Last error: " + last_error));
}

Tensor DataLoader::allocate_images(const Shape& sample_shape, int64_t count) const {
  Shape shape{count};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  Tensor images = options_.allocate(shape, DType::Float32);
  TS_CHECK(
      images.shape() == shape && images.dtype() == DType::Float32 && images.is_contiguous() && images.device().is_cpu(),
      "DataLoader: the batch allocator returned ", describe(images), " for float32", shape,
      " (must be contiguous, on the CPU)");
  return images;
}

Batch DataLoader::make_batch(Run& run, int64_t b) const {
  NoGradGuard no_grad;  // transforms may use tensor ops; nothing here is differentiated
  const int64_t begin = b * options_.batch_size;
  const int64_t count = std::min<int64_t>(options_.batch_size, static_cast<int64_t>(run.order.size()) - begin);
  Batch batch;
  batch.index = b;
  for (int64_t j = 0; j < count; ++j)
    batch.padding += run.positions[static_cast<size_t>(begin + j)] >= run.size_before_padding;
  batch.labels = options_.allocate({count}, DType::Int64);
  if (transform_.writes_in_place()) {
    const Shape& sample_shape = transform_.output_shape();
    batch.images = allocate_images(sample_shape, count);
    const int64_t stride = numel_of(sample_shape);
    for (int64_t j = 0; j < count && !run.stop; ++j) {  // (an abandoned epoch's batch is discarded)
      float* slot = batch.images.data<float>() + j * stride;
      batch.labels.data<int64_t>()[j] =
          load_slot(run, begin + j,
                    [&](const EncodedImage& image, SampleRng& rng, int64_t) { transform_.write(image, rng, slot); });
    }
    return batch;
  }
  Shape sample_shape;
  for (int64_t j = 0; j < count && !run.stop; ++j) {
    Tensor image;
    batch.labels.data<int64_t>()[j] = load_slot(run, begin + j, [&](const EncodedImage& e, SampleRng& rng, int64_t i) {
      image = transform_(e, rng);
      TS_CHECK(image.defined() && image.dtype() == DType::Float32 && image.device().is_cpu(),
               "DataLoader: the transform must return a float32 CPU tensor, got ",
               image.defined() ? describe(image) : std::string("an undefined tensor"), " for ", dataset_->describe(i));
      image = image.contiguous();
    });
    if (j == 0) {
      sample_shape = image.shape();
      batch.images = allocate_images(sample_shape, count);
    }
    TS_CHECK(image.shape() == sample_shape, "DataLoader: the transform returned ", image.shape(), " for position ",
             begin + j, " of epoch ", run.epoch, " but ", sample_shape, " for the first sample of batch ", b,
             "; every sample must have the same shape");
    std::memcpy(batch.images.data<float>() + j * image.numel(), image.data<float>(), image.numel() * sizeof(float));
  }
  return batch;
}

void DataLoader::worker_loop(Run& run) const {
  // Workers run beside the training step's compute threads: tensor code in a transform must not
  // start an OpenMP team of its own on the cores the step is using.
  ScopedThreadLimit single_threaded(1);
  const int64_t window = static_cast<int64_t>(options_.workers) * options_.prefetch;
  for (;;) {
    int64_t b;
    {
      std::unique_lock<std::mutex> lock(run.mu);
      run.work_cv.wait(lock, [&] {
        return run.stop || run.next_claim >= run.num_batches || run.next_claim < run.next_deliver + window;
      });
      if (run.stop || run.next_claim >= run.num_batches) return;
      b = run.next_claim++;
    }
    Result result;
    try {
      result.batch = make_batch(run, b);
    } catch (...) { result.error = std::current_exception(); }
    {
      std::lock_guard<std::mutex> lock(run.mu);
      if (run.stop) return;
      run.done.emplace(b, std::move(result));
    }
    run.ready_cv.notify_all();
  }
}

std::optional<Batch> DataLoader::next() {
  TS_CHECK(run_ != nullptr, "DataLoader::next: call start_epoch first");
  Run& run = *run_;
  Result result;
  {
    std::unique_lock<std::mutex> lock(run.mu);
    if (run.next_deliver >= run.num_batches) {
      const bool report = !run.finished && options_.verbose && !run.skipped.empty();
      run.finished = true;
      lock.unlock();
      if (report)
        std::fprintf(stderr, "warning: skipped %zu corrupt image(s) in epoch %lld\n", run.skipped.size(),
                     static_cast<long long>(run.epoch));
      return std::nullopt;
    }
    const auto waiting_since = std::chrono::steady_clock::now();
    const auto add_wait = [&] {
      waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting_since).count();
    };
    if (options_.workers == 0) {
      const int64_t b = run.next_deliver++;
      lock.unlock();
      Batch batch = make_batch(run, b);
      add_wait();
      return batch;
    }
    run.ready_cv.wait(lock, [&] { return run.done.count(run.next_deliver) > 0; });
    add_wait();
    auto it = run.done.find(run.next_deliver);
    result = std::move(it->second);
    run.done.erase(it);
    ++run.next_deliver;
  }
  run.work_cv.notify_all();
  if (result.error) std::rethrow_exception(result.error);
  return std::move(result.batch);
}

int64_t DataLoader::skipped_in_epoch() const {
  if (!run_) return 0;
  std::lock_guard<std::mutex> lock(run_->mu);
  return static_cast<int64_t>(run_->skipped.size());
}

std::vector<std::string> DataLoader::skipped_paths() const {
  std::vector<std::string> paths;
  if (!run_) return paths;
  std::lock_guard<std::mutex> lock(run_->mu);
  for (int64_t index : run_->skipped) paths.push_back(dataset_->describe(index));
  return paths;
}

}  // namespace tessera::data
