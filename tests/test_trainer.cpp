// The training loop (train/trainer.h) end to end: learning on real Fashion-MNIST images, bit-exact
// resume, the NaN stop that leaves checkpoints intact, and the run folder's files.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

#include "tessera/core/atomic_file.h"
#include "tessera/data/dataset.h"
#include "gradcheck.h"
#include "tessera/models/xcit.h"
#include "tessera/io/safetensors.h"
#include "tessera/train/checkpoint.h"
#include "temp_dir.h"
#include "tessera/train/trainer.h"

using namespace tessera;
namespace fs = std::filesystem;
using testing::TempDir;

namespace {

// A small XCiT for 28x28 inputs (patch 4: a 7x7 token grid), fast enough for a test.
std::shared_ptr<models::Model> tiny_xcit(int64_t in_chans, int64_t classes) {
  models::XcitConfig c;
  c.img_size = 28;
  c.patch_size = 4;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 2;
  c.mlp_ratio = 2;
  c.in_chans = in_chans;
  c.num_classes = classes;
  return std::make_shared<models::Xcit>(c);
}

// The first n samples of another dataset.
class Subset : public data::Dataset {
 public:
  Subset(std::shared_ptr<data::Dataset> base, int64_t n) : base_(std::move(base)), n_(std::min(n, base_->size())) {}
  int64_t size() const override { return n_; }
  data::Sample get(int64_t i) const override { return base_->get(i); }
  const std::vector<std::string>& classes() const override { return base_->classes(); }
  std::string describe(int64_t i) const override { return base_->describe(i); }

 private:
  std::shared_ptr<data::Dataset> base_;
  int64_t n_;
};

// Synthetic 28x28 gray images: class k is a bright 7x7 square in cell k of a 2x2 grid, on noise.
class Squares : public data::Dataset {
 public:
  explicit Squares(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  data::Sample get(int64_t i) const override {
    data::Sample s{data::Image(28, 28, 1), i % 4};
    for (int64_t p = 0; p < 28 * 28; ++p) s.image.pixels[p] = static_cast<uint8_t>((p * 37 + i * 11) % 64);
    const int64_t y0 = 3 + 14 * (s.label / 2), x0 = 3 + 14 * (s.label % 2);
    for (int64_t y = y0; y < y0 + 7; ++y)
      for (int64_t x = x0; x < x0 + 7; ++x) *s.image.at(y, x) = 230;
    return s;
  }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe(int64_t i) const override { return "squares[" + std::to_string(i) + "]"; }

 private:
  int64_t n_;
  std::vector<std::string> classes_{"a", "b", "c", "d"};
};

train::TrainOptions quick_options(const std::string& output) {
  train::TrainOptions o;
  o.eval_transform.in_chans = o.train_transform.in_chans = 1;
  o.eval_transform.mean = o.train_transform.mean = {0.5};
  o.eval_transform.std = o.train_transform.std = {0.5};
  o.eval_transform.crop_pct = 1.0;
  o.train_transform.primary = "crop_pad";
  o.train_transform.color_jitter = 0;
  o.workers = 1;
  o.batch_size = 16;
  o.lr = 2e-3;
  o.warmup_epochs = 0.2;
  o.weight_decay = 0.05;
  o.output = output;
  o.verbose = false;
  return o;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}


}  // namespace

TEST_CASE("training on a Fashion-MNIST subset lowers the loss and beats chance by far", "[train]") {
  // Debian's dataset-fashion-mnist (scripts/setup.sh installs it). Its absence fails the test.
  auto train_set = std::make_shared<Subset>(data::open_dataset("fashion_mnist", "", "train", 1), 2048);
  auto eval_set = std::make_shared<Subset>(data::open_dataset("fashion_mnist", "", "test", 1), 512);
  manual_seed(0);
  auto model = tiny_xcit(1, 10);
  TempDir dir;
  train::TrainOptions o = quick_options(dir.path());
  o.epochs = 3;  // 3 x 128 steps of 16 images
  o.warmup_epochs = 0.5;
  train::Trainer trainer(model, train_set, eval_set, o);
  const auto rows = trainer.fit();
  REQUIRE(rows.size() == 3);
  INFO("train loss " << rows[0].train_loss << " -> " << rows[2].train_loss << ", eval top1 " << rows[2].eval_top1);
  CHECK(rows[2].train_loss < rows[0].train_loss - 0.3);
  CHECK(rows[2].eval_top1 > 55.0);  // chance is 10%
  // The run folder as timm leaves it.
  for (const char* f : {"args.yaml", "summary.csv", "last.safetensors", "model_best.safetensors",
                        "checkpoint-2.safetensors", "checkpoint-2.state.safetensors"})
    CHECK(fs::exists(fs::path(dir.path()) / f));
  std::ifstream csv(fs::path(dir.path()) / "summary.csv");
  std::string header;
  std::getline(csv, header);
  CHECK(header == "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr");
  bool has_events = false;
  for (const auto& e : fs::directory_iterator(dir.path()))
    has_events |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  CHECK(has_events);
  // The weights file is the model's state_dict under timm's names.
  CHECK(load_safetensors((fs::path(dir.path()) / "last.safetensors").string()).size() == model->state_dict().size());
}

TEST_CASE("resume continues bit-exactly: 2 epochs equal 1 + resume + 1", "[train]") {
  auto train_set = std::make_shared<Squares>(64);
  auto eval_set = std::make_shared<Squares>(16);
  TempDir one, two;
  auto options = [&](const std::string& out) {
    train::TrainOptions o = quick_options(out);
    o.epochs = 2;
    o.mixup = 0.8;  // Mixup, EMA, dropout and drop-path draw random numbers that must resume too
    o.cutmix = 1.0;
    o.model_ema = true;
    o.model_ema_decay = 0.9;
    o.clip_grad = 1.0;
    return o;
  };
  auto build = [] {
    manual_seed(7);
    models::XcitConfig c;
    c.img_size = 28, c.patch_size = 4, c.embed_dim = 16, c.depth = 1, c.num_heads = 2, c.mlp_ratio = 2;
    c.in_chans = 1, c.num_classes = 4, c.drop_rate = 0.1, c.drop_path_rate = 0.1;
    return std::make_shared<models::Xcit>(c);
  };

  auto straight = build();
  train::Trainer(straight, train_set, eval_set, options(one.path())).fit();

  auto first = build();
  train::TrainOptions half = options(two.path());
  half.stop_after = 1;  // interrupted after epoch 0 of 2
  train::Trainer(first, train_set, eval_set, half).fit();
  auto resumed = build();  // fresh weights: everything must come from the checkpoint
  manual_seed(12345);      // and the generator state too
  train::TrainOptions rest = options(two.path());
  rest.resume = two.path();  // a run folder: its newest checkpoint
  train::Trainer trainer(resumed, train_set, eval_set, rest);
  CHECK(trainer.start_epoch() == 1);
  trainer.fit();

  const nn::NamedTensors a = straight->state_dict(), b = resumed->state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(testing::max_abs_diff(a[i].second, b[i].second) == 0);
  }
  // The checkpoints agree byte for byte apart from their random ids: compare the tensors.
  const auto ca = train::load_checkpoint((fs::path(one.path()) / "last.safetensors").string());
  const auto cb = train::load_checkpoint((fs::path(two.path()) / "last.safetensors").string());
  REQUIRE(ca.state.size() == cb.state.size());
  for (size_t i = 0; i < ca.state.size(); ++i) {
    INFO(ca.state[i].first);
    CHECK(testing::max_abs_diff(ca.state[i].second.to(DType::Float64), cb.state[i].second.to(DType::Float64)) == 0);
  }
}

TEST_CASE("a NaN loss stops the run, names the step and leaves the checkpoints intact", "[train]") {
  auto train_set = std::make_shared<Squares>(32);
  auto eval_set = std::make_shared<Squares>(8);
  TempDir dir;
  manual_seed(1);
  auto model = tiny_xcit(1, 4);
  train::TrainOptions o = quick_options(dir.path());
  o.epochs = 1;
  train::Trainer(model, train_set, eval_set, o).fit();
  const std::string last = (fs::path(dir.path()) / "last.safetensors").string();
  const std::string saved = bytes_of(last);

  // An absurd learning rate makes the loss diverge within the next epochs.
  train::TrainOptions bad = quick_options(dir.path());
  bad.epochs = 20;
  bad.resume = dir.path();
  bad.lr = 1e12;
  bad.sched = "constant";
  bad.warmup_epochs = 0;
  bad.smoothing = 0;
  train::Trainer diverging(model, train_set, eval_set, bad);
  CHECK_THROWS_WITH(diverging.fit(), Catch::Contains("train: the loss is") && Catch::Contains("at epoch") &&
                                         Catch::Contains("step") && Catch::Contains("The last good checkpoint is " +
                                                                                    dir.path() + "/checkpoint-"));
  // Every checkpoint written before the divergence is still complete and loadable.
  const auto ck = train::load_checkpoint(last);
  CHECK(ck.epoch >= 0);
  if (ck.epoch == 0) CHECK(bytes_of(last) == saved);
}

TEST_CASE("a disk that fills up while a checkpoint is saved stops the run and loses nothing saved", "[train]") {
  auto train_set = std::make_shared<Squares>(32);
  auto eval_set = std::make_shared<Squares>(8);
  TempDir dir;
  manual_seed(1);
  auto model = tiny_xcit(1, 4);
  train::TrainOptions o = quick_options(dir.path());
  o.epochs = 3;
  o.stop_after = 1;
  o.max_train_batches = o.max_eval_batches = 1;  // what matters here is a save per epoch
  train::Trainer(model, train_set, eval_set, o).fit();
  const std::string last = (fs::path(dir.path()) / "last.safetensors").string();
  const std::string saved = bytes_of(last);

  // Epoch 1's state file (the first file of a save) meets a full disk 1000 bytes in.
  o.resume = dir.path();
  train::Trainer resumed(model, train_set, eval_set, o);
  set_disk_space_for_testing(1000);
  const std::string state1 = (fs::path(dir.path()) / "checkpoint-1.state.safetensors").string();
  CHECK_THROWS_WITH(resumed.fit(), Catch::Contains(state1) && Catch::Contains("write failed after 1000 bytes") &&
                                       Catch::Contains("No space left on device") && Catch::Contains("left unchanged"));
  set_disk_space_for_testing(std::nullopt);
  // The previous checkpoint is intact and still the newest complete one; no temporary is left.
  CHECK(bytes_of(last) == saved);
  CHECK(train::find_resume(dir.path()) == (fs::path(dir.path()) / "checkpoint-0.safetensors").string());
  CHECK(train::load_checkpoint(last).epoch == 0);
  CHECK(dir.leftovers().empty());
  CHECK(!fs::exists(state1));
  // With space again, a resume continues from it.
  train::Trainer again(model, train_set, eval_set, o);
  CHECK(again.start_epoch() == 1);
  CHECK(again.fit().size() == 1);
  CHECK(train::load_checkpoint(last).epoch == 1);
}

namespace {

// Resident memory of this process now (/proc/self/statm), in bytes.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * ::sysconf(_SC_PAGESIZE);
}

// Squares whose first item, read once per evaluation (the evaluation loader does not shuffle),
// samples the process's resident memory: after each epoch's training steps.
class MeasuringSquares : public Squares {
 public:
  using Squares::Squares;
  data::Sample get(int64_t i) const override {
    if (i == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      rss_.push_back(resident_bytes());
    }
    return Squares::get(i);
  }
  std::vector<int64_t> rss() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rss_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<int64_t> rss_;
};

}  // namespace

TEST_CASE("resident memory stays flat over many epochs: no leak per step, epoch or checkpoint", "[train][leaks]") {
  auto train_set = std::make_shared<Squares>(64);
  auto eval_set = std::make_shared<MeasuringSquares>(16);
  TempDir dir;
  manual_seed(3);
  auto model = tiny_xcit(1, 4);
  train::TrainOptions o = quick_options(dir.path());
  o.epochs = 12;  // 4 steps of 16 images each, an evaluation and a checkpoint save per epoch
  o.model_ema = true;
  train::Trainer(model, train_set, eval_set, o).fit();
  const std::vector<int64_t> rss = eval_set->rss();
  REQUIRE(rss.size() == 24);  // two evaluations per epoch: the model's and the EMA's
  // After the first two epochs (allocator caches, thread pools, lazily built tables), what each
  // later epoch adds: a leak of even one activation per step would grow it by megabytes.
  const int64_t settled = rss[4], growth = *std::max_element(rss.begin() + 4, rss.end()) - settled;
  std::string trace;
  for (int64_t r : rss) trace += std::to_string(r >> 10) + " ";
  INFO("resident KiB per epoch: " << trace);
  CHECK(growth < 4 * 1024 * 1024);
}

TEST_CASE("Trainer rejects unusable settings before any work", "[train]") {
  auto tiny = std::make_shared<Squares>(8);
  train::TrainOptions o = quick_options("");
  o.batch_size = 16;
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), tiny, tiny, o),
                    Catch::Contains("8 samples") && Catch::Contains("batch of 16"));
  o.batch_size = 4;
  o.opt = "lion";
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), tiny, tiny, o), Catch::Contains("lion"));
  o.opt = "adamw";
  o.resume = "/nonexistent/run";
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), tiny, tiny, o), Catch::Contains("/nonexistent/run"));
}
