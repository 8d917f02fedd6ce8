// `tessera bench-data`: how fast the input pipeline feeds a model, on an image folder the user
// gives: images/s of decoding alone, of decoding plus the training transforms (timm's
// RandomResizedCrop, flip, RandAugment, normalise) and plus the evaluation transforms, each on one
// thread with the time split by stage (data/stage_clock.h), and of the whole loader (workers,
// batches) at each worker count asked for. scripts/bench_data.sh runs timm's loader on the same
// folder (bench/bench_data.py) and alternates the two for docs/benchmarks.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/core/parallel.h"
#include "tessera/data/dataset.h"
#include "tessera/data/loader.h"
#include "tessera/data/pipeline.h"
#include "tessera/data/stage_clock.h"
#include "tessera/io/json.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One measurement: images/s, and where one thread's time went (empty for the loader).
struct Measured {
  std::string what;
  int workers = 1;
  double images_per_s = 0;
  data::StageClock split;
  int64_t images = 0;
};

// The first `count` images of a folder, for --max-images.
class FirstImages final : public data::Dataset {
 public:
  FirstImages(std::shared_ptr<const data::Dataset> all, int64_t count) : all_(std::move(all)), count_(count) {}
  int64_t size() const override { return count_; }
  data::Sample get(int64_t index) const override { return all_->get(checked(index)); }
  data::EncodedSample get_encoded(int64_t index) const override { return all_->get_encoded(checked(index)); }
  const std::vector<std::string>& classes() const override { return all_->classes(); }
  std::string describe(int64_t index) const override { return all_->describe(checked(index)); }
  int64_t label(int64_t index) const override { return all_->label(checked(index)); }

 private:
  int64_t checked(int64_t index) const {
    check_index(index, "bench-data's images");
    return index;
  }
  std::shared_ptr<const data::Dataset> all_;
  int64_t count_;
};

std::vector<int> worker_counts(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 1 || n > 256)
      throw UsageError("option --workers: expected a comma-separated list of counts from 1 to 256, got '" + list + "'");
    out.push_back(static_cast<int>(n));
  }
  if (out.empty()) throw UsageError("option --workers: expected at least one worker count");
  return out;
}

// Runs `one(i)` over the images 0, 1, ... (cycling) on this thread for at least `seconds` and at
// least one pass over `count` images, with this thread's stage clock on.
template <class F>
Measured single_thread(const std::string& what, int64_t count, double seconds, const F& one) {
  Measured m;
  m.what = what;
  data::StageClock* previous = data::set_thread_stage_clock(&m.split);
  const auto start = Clock::now();
  double elapsed = 0;
  while (m.images < count || elapsed < seconds) {
    one(m.images % count, m.images / count);
    ++m.images;
    elapsed = seconds_since(start);
  }
  data::set_thread_stage_clock(previous);
  m.images_per_s = static_cast<double>(m.images) / elapsed;
  return m;
}

// The loader with `workers` threads over the folder for at least `seconds` (epochs restart).
Measured whole_loader(std::shared_ptr<const data::Dataset> ds, const data::Transform& transform, int workers,
                      int64_t batch, double seconds) {
  data::LoaderOptions o;
  o.batch_size = batch;
  o.workers = workers;
  o.drop_last = true;
  o.verbose = false;
  data::DataLoader loader(std::move(ds), transform, o);
  TS_CHECK(loader.batches_per_epoch() > 0, "bench-data: the folder holds fewer images than one batch of ", batch);
  Measured m;
  m.what = "loader";
  m.workers = workers;
  int64_t epoch = 0;
  loader.start_epoch(epoch);
  (void)loader.next();  // the workers' start and first batch are not timed
  const auto start = Clock::now();
  double elapsed = 0;
  while (m.images == 0 || elapsed < seconds) {  // at least one batch
    std::optional<data::Batch> b = loader.next();
    if (!b) {
      loader.start_epoch(++epoch);
      continue;
    }
    m.images += b->images.size(0);
    elapsed = seconds_since(start);
  }
  m.images_per_s = static_cast<double>(m.images) / elapsed;
  return m;
}

void print_table(const std::vector<Measured>& rows) {
  std::printf("%-44s %8s %12s   %s\n", "stage", "workers", "images/s", "one thread's time per image (ms)");
  for (const Measured& m : rows) {
    std::printf("%-44s %8d %12.1f  ", m.what.c_str(), m.workers, m.images_per_s);
    if (m.what != "loader")
      for (size_t s = 0; s < data::kStageCount; ++s)
        if (m.split.seconds[s] > 0)
          std::printf(" %s %.2f", data::stage_name(static_cast<data::Stage>(s)),
                      1e3 * m.split.seconds[s] / static_cast<double>(m.images));
    std::printf("\n");
  }
}

}  // namespace

int run_bench_data(const Argv& args) {
  ArgParser p("bench-data",
              "Measure the input pipeline on an image folder: decoding, the training and evaluation transforms "
              "(one thread, time per stage), and the whole loader at each worker count.");
  p.option("--data-dir", "DIR", "an image folder (DIR/<class>/<image>)");
  p.option("--img-size", "N", "the crop's side", "224");
  p.option("--aa", "POLICY", "RandAugment policy of the training transform (\"\" for colour jitter instead)",
           "rand-m9-mstd0.5-inc1");
  p.option("--interpolation", "NAME", "bilinear or bicubic", "bicubic");
  p.option("--crop-pct", "F", "evaluation: resize to img_size / crop_pct, then center crop", "0.875");
  p.option("--batch", "B", "images per loader batch", "64", "-b");
  p.option("--workers", "N,N,...", "loader worker counts to measure", "1,2");
  p.option("--seconds", "S", "time each measurement at least this long", "3");
  p.option("--max-images", "N", "use the first N images of the folder (0: all)", "0");
  p.flag("--full-decode", "decode every JPEG at full size (the baseline of the reduced decode)");
  p.flag("--open-only", "only open the folder (list its classes and files) and say how long that took");
  p.flag("--json", "print one JSON object per measurement instead of the table");
  if (!p.parse(args)) return 0;
  if (p.get("--data-dir").empty()) throw UsageError("option --data-dir: an image folder is required");
  const double seconds = p.get_double("--seconds");
  const int64_t batch = p.get_int("--batch"), max_images = p.get_int("--max-images");
  if (seconds < 0 || batch < 1 || max_images < 0)
    throw UsageError("options --seconds, --batch and --max-images: expected >= 0, >= 1 and >= 0");
  const std::vector<int> workers = worker_counts(p.get("--workers"));
  set_num_threads(1);  // the loader's workers are the parallelism; a transform's tensor code stays on one thread

  const auto opening = Clock::now();
  const std::shared_ptr<data::Dataset> folder = data::open_image_folder(p.get("--data-dir"), 3);
  const double open_seconds = seconds_since(opening);
  std::fprintf(stderr, "bench-data: opened %s: %lld images in %zu classes in %.2f s\n", p.get("--data-dir").c_str(),
               static_cast<long long>(folder->size()), folder->classes().size(), open_seconds);
  if (p.is_set("--open-only")) return 0;
  const int64_t count = max_images > 0 ? std::min(max_images, folder->size()) : folder->size();
  const auto ds = std::make_shared<const FirstImages>(folder, count);
  data::TransformOptions train;
  train.is_training = true;
  train.img_size = p.get_int("--img-size");
  train.auto_augment = p.get("--aa");
  train.interpolation = p.get("--interpolation");
  data::TransformOptions eval = train;
  eval.is_training = false;
  eval.crop_pct = p.get_double("--crop-pct");
  const bool full_decode = p.is_set("--full-decode");
  const auto decoding = [full_decode](data::SampleTransform t) -> data::Transform {
    if (!full_decode) return t;
    return [t](const data::EncodedImage& e, data::SampleRng& rng) {
      std::optional<data::EncodedImage> full;
      {
        data::StageTimer timer(data::Stage::Decode);
        full.emplace(e.decode());
      }
      return t(*full, rng);
    };
  };
  const data::Transform train_tf = decoding(data::create_transform(train)),
                        eval_tf = decoding(data::create_transform(eval));

  std::vector<Measured> rows;
  rows.push_back(single_thread("decode (full size)", count, seconds, [&](int64_t i, int64_t) {
    const std::string path = ds->describe(i);
    std::string bytes;
    {
      data::StageTimer timer(data::Stage::Read);
      bytes = data::read_file_bytes(path);
    }
    data::StageTimer timer(data::Stage::Decode);
    (void)data::decode_image_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
  }));
  const auto transformed = [&](const std::string& what, const data::Transform& tf) {
    return single_thread(what, count, seconds, [&](int64_t i, int64_t pass) {
      data::SampleRng rng(0, static_cast<uint64_t>(pass), static_cast<uint64_t>(i));
      (void)tf(ds->get_encoded(i).image, rng);
    });
  };
  rows.push_back(transformed(
      train.auto_augment.empty() ? "train: rrc + flip + jitter" : "train: rrc + flip + " + train.auto_augment,
      train_tf));
  rows.push_back(transformed("eval: resize + center crop", eval_tf));
  for (int w : workers) rows.push_back(whole_loader(ds, train_tf, w, batch, seconds));

  if (!p.is_set("--json")) {
    std::printf("bench-data: %lld images of %s, %lld px crops%s\n", static_cast<long long>(count),
                p.get("--data-dir").c_str(), static_cast<long long>(train.img_size),
                full_decode ? ", JPEGs decoded at full size" : ", JPEGs decoded reduced for the crop");
    print_table(rows);
    return 0;
  }
  for (const Measured& m : rows) {
    json::Writer w;
    w.begin_object().key("side").value(std::string(full_decode ? "tessera-full-decode" : "tessera"));
    w.key("stage").value(m.what).key("workers").value(int64_t{m.workers}).key("images").value(m.images);
    w.key("images_per_s").value(std::round(m.images_per_s * 10) / 10);
    if (m.what != "loader") {
      w.key("ms_per_image").begin_object();
      for (size_t s = 0; s < data::kStageCount; ++s)
        w.key(data::stage_name(static_cast<data::Stage>(s)))
            .value(std::round(1e5 * m.split.seconds[s] / static_cast<double>(m.images)) / 100);
      w.end_object();
    }
    std::puts(w.end_object().str().c_str());
  }
  return 0;
}

}  // namespace tessera::cli
