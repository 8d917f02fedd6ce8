// The training loop (train/trainer.h) end to end: learning on real Fashion-MNIST images, bit-exact
// resume, the NaN stop that leaves checkpoints intact, and the run folder's files.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include "tessera/core/atomic_file.h"
#include "tessera/core/process_memory.h"
#include "tessera/data/class_map.h"
#include "tessera/data/dataset.h"
#include "gradcheck.h"
#include "tessera/models/builder.h"
#include "tessera/models/xcit.h"
#include "tessera/io/safetensors.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/layer_decay.h"
#include "tessera/train/output.h"
#include "sanitized.h"
#include "temp_dir.h"
#include "train_fixtures.h"
#include "tessera/train/trainer.h"

using namespace tessera;
namespace fs = std::filesystem;
using testing::Squares;
using testing::TempDir;

namespace {

// A small XCiT for 28x28 inputs (patch 4: a 7x7 token grid), fast enough for a test.
models::XcitConfig tiny_xcit_config(int64_t in_chans, int64_t classes) {
  models::XcitConfig c;
  c.img_size = 28;
  c.patch_size = 4;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 2;
  c.mlp_ratio = 2;
  c.in_chans = in_chans;
  c.num_classes = classes;
  return c;
}

std::shared_ptr<models::Model> tiny_xcit(int64_t in_chans, int64_t classes) {
  return std::make_shared<models::Xcit>(tiny_xcit_config(in_chans, classes));
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

train::TrainOptions quick_options(const std::string& output) {
  train::TrainOptions o = testing::square_options(output, 16);
  o.train_transform.color_jitter = 0;
  o.lr = 2e-3;
  o.warmup_epochs = 0.2;
  o.weight_decay = 0.05;
  return o;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A run of `epochs` in `dir` that stops after its first: one batch each way, what matters is the save.
train::TrainOptions first_epoch_saved(const std::string& dir, int64_t epochs) {
  train::TrainOptions o = quick_options(dir);
  o.epochs = epochs;
  o.stop_after = 1;
  o.max_train_batches = o.max_eval_batches = 1;
  return o;
}

}  // namespace

TEST_CASE("training on a Fashion-MNIST subset lowers the loss and beats chance by far", "[train]") {
  // Debian's dataset-fashion-mnist (scripts/setup.sh installs it). Its absence fails the test.
  // 3 x 128 steps of 16 images; under a sanitizer 3 x 16 steps, the same code paths (how far the
  // model gets is the Release suite's to check).
  const int64_t train_images = testing::kSanitized ? 256 : 2048, eval_images = testing::kSanitized ? 128 : 512;
  auto train_set = std::make_shared<Subset>(data::open_dataset("fashion_mnist", "", "train", 1), train_images);
  auto eval_set = std::make_shared<Subset>(data::open_dataset("fashion_mnist", "", "test", 1), eval_images);
  manual_seed(0);
  auto model = tiny_xcit(1, 10);
  TempDir dir;
  train::TrainOptions o = quick_options(dir.path());
  o.epochs = 3;
  o.warmup_epochs = 0.5;
  train::Trainer trainer(model, train_set, eval_set, o);
  const auto rows = trainer.fit();
  REQUIRE(rows.size() == 3);
  INFO("train loss " << rows[0].train_loss << " -> " << rows[2].train_loss << ", eval top1 " << rows[2].eval_top1);
  if (testing::kSanitized) {
    CHECK(rows[2].train_loss < rows[0].train_loss);
  } else {
    CHECK(rows[2].train_loss < rows[0].train_loss - 0.3);
    CHECK(rows[2].eval_top1 > 55.0);  // chance is 10%
  }
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

// In float32 and under the CPU's bfloat16 autocast (--amp bf16), whose checkpoints hold the same
// float32 master weights and optimizer state as a float32 run's.
TEST_CASE("resume continues bit-exactly: 2 epochs equal 1 + resume + 1", "[train]") {
  const std::optional<DType> amp = GENERATE(std::optional<DType>(), std::optional<DType>(DType::BFloat16));
  INFO((amp ? "--amp bf16" : "float32"));
  auto train_set = std::make_shared<Squares>(64);
  auto eval_set = std::make_shared<Squares>(16);
  TempDir one, two;
  auto options = [&](const std::string& out) {
    train::TrainOptions o = quick_options(out);
    o.amp = amp;
    o.epochs = 2;
    o.mixup.mixup_alpha = 0.8;  // Mixup, EMA, dropout and drop-path draw random numbers that must resume too
    o.mixup.cutmix_alpha = 1.0;
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
    const DType saved = ca.state[i].second.dtype();
    CHECK((!is_floating(saved) || saved == DType::Float32 || saved == DType::Float64));  // never bfloat16
    CHECK(testing::max_abs_diff(ca.state[i].second.to(DType::Float64), cb.state[i].second.to(DType::Float64)) == 0);
  }
}

TEST_CASE("a run writes its class index, and a resume refuses a dataset that numbers its classes otherwise",
          "[train]") {
  // Squares whose class folders changed: "c" renamed, so label 2 would mean something else.
  struct Renamed : Squares {
    using Squares::Squares;
    const std::vector<std::string>& classes() const override { return names; }
    std::vector<std::string> names{"a", "b", "c2", "d"};
  };
  TempDir dir;
  auto train_set = std::make_shared<Squares>(32), eval_set = std::make_shared<Squares>(8);
  manual_seed(1);
  auto model = tiny_xcit(1, 4);
  train::TrainOptions o = first_epoch_saved(dir.path(), 2);
  train::Trainer(model, train_set, eval_set, o).fit();
  const std::string index = (fs::path(dir.path()) / "class_map.txt").string();
  CHECK(bytes_of(index) == "a\nb\nc\nd\n");  // timm's --class-map format
  CHECK(data::read_class_map(index) == train_set->classes());

  o.resume = dir.path();
  CHECK_THROWS_WITH(train::Trainer(model, std::make_shared<Renamed>(32), eval_set, o),
                    Catch::Contains("resume: the training dataset has 4 classes") && Catch::Contains(index) &&
                        Catch::Contains("label 2") && Catch::Contains("\"c\" in the index, \"c2\" in the dataset"));
  train::Trainer same(model, train_set, eval_set, o);  // the same classes resume
  CHECK(same.start_epoch() == 1);
  CHECK_THROWS_WITH(data::write_class_map(index, {"a", "b\nc"}),
                    Catch::Contains("class 1") && Catch::Contains("one name per line"));
  CHECK(bytes_of(index) == "a\nb\nc\nd\n");  // nothing written
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
                                         Catch::Contains("step") &&
                                         Catch::Contains("The last good checkpoint is " + dir.path() + "/checkpoint-"));
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
  train::TrainOptions o = first_epoch_saved(dir.path(), 3);
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

TEST_CASE("a run folder opened again drops the temporaries a killed run left, and nothing else", "[train]") {
  TempDir dir;
  // The pid of a process that has exited and been reaped: no process has it now.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  REQUIRE(dead > 0);
  REQUIRE(::waitpid(dead, nullptr, 0) == dead);
  const fs::path run = dir.path();
  const std::vector<std::string> abandoned = {"args.yaml.tmp." + std::to_string(dead),
                                              "summary.csv.tmp." + std::to_string(dead),
                                              "last.state.safetensors.tmp." + std::to_string(dead)};
  const std::vector<std::string> kept = {"args.yaml",
                                         "notes.tmp.txt",
                                         "x.tmp.",
                                         "x.tmp.12ab",
                                         "mine.tmp." + std::to_string(::getpid()),  // a live writer's
                                         "init.tmp.1"};                             // pid 1 is alive
  for (const auto& name : abandoned) std::ofstream(run / name) << "partial";
  for (const auto& name : kept) std::ofstream(run / name) << "keep";

  remove_abandoned_temporaries(run.string());
  for (const auto& name : abandoned) CHECK_FALSE(fs::exists(run / name));
  for (const auto& name : kept) CHECK(fs::exists(run / name));

  // The trainer does it when it opens the folder, through its CheckpointSaver (a kill can land
  // while args.yaml is written).
  std::ofstream(run / abandoned[0]) << "partial";
  auto model = tiny_xcit(1, 4);
  train::TrainOptions o = quick_options(run.string());
  train::Trainer trainer(model, std::make_shared<Squares>(32), std::make_shared<Squares>(8), o);
  CHECK_FALSE(fs::exists(run / abandoned[0]));
}

namespace {

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
  o.loader.batch_size = 16;
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), tiny, tiny, o),
                    Catch::Contains("8 samples") && Catch::Contains("batch of 16"));
  o.loader.batch_size = 4;
  o.opt = "lion";
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), tiny, tiny, o), Catch::Contains("lion"));
  o.opt = "adamw";
  o.resume = "/nonexistent/run";
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), tiny, tiny, o), Catch::Contains("/nonexistent/run"));
}

namespace {

// Options for runs of a few steps on Squares: constant lr, no warm-up, no weight decay, no output.
train::TrainOptions step_options() {
  train::TrainOptions o = quick_options("");
  o.train_transform.primary = "none";
  o.train_transform.hflip = 0;
  o.loader.batch_size = 4;
  o.epochs = 1;
  o.sched = "constant";
  o.warmup_epochs = 0;
  o.weight_decay = 0;
  o.max_train_batches = 1;
  o.max_eval_batches = 1;
  return o;
}

// Each parameter's change over a fit() of a freshly seeded tiny XCiT under `o`.
std::map<std::string, Tensor> weight_changes(const train::TrainOptions& o) {
  auto data = std::make_shared<Squares>(16);
  manual_seed(3);
  auto model = tiny_xcit(1, 4);
  std::map<std::string, Tensor> before;
  for (const auto& [name, p] : model->named_parameters()) before[name] = p.clone();
  train::Trainer trainer(model, data, data, o);
  trainer.fit();
  std::map<std::string, Tensor> change;
  for (const auto& [name, p] : model->named_parameters()) change[name] = sub(p, before[name]);
  return change;
}

double max_abs(const Tensor& t) { return amax(abs(t.to(DType::Float64))).item(); }

// What fit() writes on stderr.
template <class F>
std::string stderr_of(F&& f) {
  TempDir dir;
  const std::string path = (fs::path(dir.path()) / "stderr.txt").string();
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  FILE* file = std::fopen(path.c_str(), "w");
  ::dup2(::fileno(file), STDERR_FILENO);
  f();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::fclose(file);
  return bytes_of(path);
}

}  // namespace

TEST_CASE("layer ids follow timm's group_matcher for the four families", "[train][layer_decay]") {
  // XCiT / UFO-ViT: stem, blocks, class-attention blocks (norm joins the last), head.
  CHECK(train::layer_ids({"cls_token", "pos_embed.token_projection.weight", "patch_embed.proj.0.0.weight",
                          "blocks.0.attn.qkv.weight", "blocks.1.gamma1", "cls_attn_blocks.0.attn.q.weight",
                          "cls_attn_blocks.1.norm1.weight", "norm.weight", "head.weight", "head.bias"}) ==
        std::vector<int64_t>{0, 0, 0, 1, 2, 3, 4, 4, 5, 5});
  // CaiT: blocks_token_only after the blocks; block 10 after block 9 (numbers, not text).
  CHECK(train::layer_ids({"blocks.10.attn.proj.weight", "blocks.9.attn.proj.weight", "blocks_token_only.0.gamma_1",
                          "cls_token", "head.weight"}) == std::vector<int64_t>{2, 1, 3, 0, 4});
  // CoaT: each stage's embedding before its serial blocks, then the parallel blocks.
  CHECK(train::layer_ids({"patch_embed1.proj.weight", "cls_token1", "serial_blocks1.0.mlp.fc1.weight",
                          "patch_embed2.proj.weight", "crpe2.conv_list.0.weight", "serial_blocks2.0.norm1.weight",
                          "parallel_blocks.0.norm12.weight", "norm4.weight", "aggregate.weight", "head.bias"}) ==
        std::vector<int64_t>{0, 0, 1, 2, 2, 3, 4, 4, 4, 5});
}

TEST_CASE("trainer: --layer-decay scales each layer's learning rate, the head's by 1", "[train][layer_decay]") {
  // Adam's first update is lr·g/(|g| + eps), about lr·sign(g): its size is the group's lr itself.
  train::TrainOptions plain = step_options();
  train::TrainOptions decayed = plain;
  decayed.layer_decay = 0.5;
  const auto a = weight_changes(plain), b = weight_changes(decayed);
  // tiny_xcit: stem 0, blocks 1-2, class-attention blocks 3-4 (with norm), head 5.
  const std::vector<std::pair<std::string, double>> expected = {{"patch_embed.proj.0.0.weight", 1.0 / 32},
                                                                {"blocks.0.attn.qkv.weight", 1.0 / 16},
                                                                {"blocks.1.attn.qkv.weight", 1.0 / 8},
                                                                {"cls_attn_blocks.1.attn.q.weight", 1.0 / 2},
                                                                {"norm.weight", 1.0 / 2},
                                                                {"head.weight", 1.0}};
  for (const auto& [name, scale] : expected) {
    INFO(name);
    REQUIRE(a.count(name));
    CHECK(max_abs(b.at(name)) == Approx(scale * max_abs(a.at(name))).epsilon(1e-3));
  }
  train::TrainOptions bad = plain;
  bad.layer_decay = 1.5;
  auto data = std::make_shared<Squares>(16);
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), data, data, bad),
                    Catch::Contains("--layer-decay") && Catch::Contains("(0, 1]"));
}

TEST_CASE("trainer: --opt-eps and --opt-betas reach the optimizer", "[train]") {
  train::TrainOptions o = step_options();
  const double plain = max_abs(weight_changes(o).at("head.weight"));
  o.opt_eps = 1e3;  // the first update lr·g/(|g| + eps) becomes tiny
  CHECK(max_abs(weight_changes(o).at("head.weight")) < 1e-3 * plain);
  o.opt_eps.reset();
  o.opt_betas = std::array<double, 2>{0.9, 1.5};
  auto data = std::make_shared<Squares>(16);
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), data, data, o), Catch::Contains("betas") && Catch::Contains("1.5"));
  o.opt_betas.reset();
  o.opt_eps = -1;
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), data, data, o), Catch::Contains("eps"));
}

TEST_CASE("trainer: --cooldown-epochs adds epochs at min_lr after a cosine schedule", "[train]") {
  auto data = std::make_shared<Squares>(16);
  train::TrainOptions o = step_options();
  o.sched = "cosine";
  o.epochs = 2;
  o.cooldown_epochs = 2;
  o.min_lr = 1e-5;
  manual_seed(0);
  auto rows = train::Trainer(tiny_xcit(1, 4), data, data, o).fit();
  REQUIRE(rows.size() == 4);
  CHECK(rows[1].lr > o.min_lr);
  CHECK(rows[2].lr == o.min_lr);
  CHECK(rows[3].lr == o.min_lr);
  o.sched = "step";  // timm's step schedule has no cooldown
  CHECK(train::Trainer(tiny_xcit(1, 4), data, data, o).fit().size() == 2);
  o.cooldown_epochs = -1;
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), data, data, o), Catch::Contains("--cooldown-epochs"));
}

TEST_CASE("trainer: --start-epoch starts the run and its schedule at that epoch", "[train]") {
  auto data = std::make_shared<Squares>(16);
  train::TrainOptions o = step_options();
  o.sched = "cosine";
  o.epochs = 3;
  o.max_train_batches = 2;
  manual_seed(0);
  const auto full = train::Trainer(tiny_xcit(1, 4), data, data, o).fit();
  o.start_epoch = 1;
  train::Trainer late(tiny_xcit(1, 4), data, data, o);
  CHECK(late.start_epoch() == 1);
  const auto rows = late.fit();
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].epoch == 1);
  CHECK(rows[0].lr == full[1].lr);  // the schedule at epoch 1's last update, as in the full run
  CHECK(rows[1].lr == full[2].lr);
  o.start_epoch = 3;
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), data, data, o),
                    Catch::Contains("--start-epoch") && Catch::Contains("[0, 3)"));
}

TEST_CASE("trainer: --val-interval evaluates every N epochs and after the last", "[train]") {
  auto data = std::make_shared<Squares>(16);
  TempDir dir;
  train::TrainOptions o = step_options();
  o.output = dir.path();
  o.epochs = 3;
  o.val_interval = 2;
  manual_seed(0);
  const auto rows = train::Trainer(tiny_xcit(1, 4), data, data, o).fit();
  REQUIRE(rows.size() == 3);
  CHECK(std::isnan(rows[0].eval_top1));
  CHECK(std::isnan(rows[0].eval_loss));
  CHECK(std::isfinite(rows[1].eval_top1));
  CHECK(std::isfinite(rows[2].eval_top1));  // the last epoch is always evaluated
  CHECK(bytes_of((fs::path(dir.path()) / "summary.csv").string()).find("\n0,") != std::string::npos);
  CHECK(bytes_of((fs::path(dir.path()) / "summary.csv").string()).find(",nan,nan,nan,") != std::string::npos);
  // Every epoch still leaves a checkpoint to resume from.
  CHECK(fs::exists(fs::path(dir.path()) / "checkpoint-0.safetensors"));
  o.val_interval = 0;
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), data, data, o), Catch::Contains("--val-interval"));
}

TEST_CASE("trainer: --initial-checkpoint starts from a checkpoint's weights and nothing else", "[train]") {
  auto data = std::make_shared<Squares>(16);
  TempDir dir;
  train::TrainOptions o = step_options();
  o.output = dir.path();
  o.epochs = 2;
  manual_seed(0);
  train::Trainer(tiny_xcit(1, 4), data, data, o).fit();
  const nn::NamedTensors saved = train::load_checkpoint(*train::find_resume(dir.path())).weights;

  for (const std::string& source : {dir.path(), (fs::path(dir.path()) / "checkpoint-1.safetensors").string(),
                                    (fs::path(dir.path()) / "checkpoint-1.state.safetensors").string()}) {
    INFO(source);
    train::TrainOptions fresh = step_options();
    fresh.initial_checkpoint = source;
    manual_seed(99);  // other initial weights
    train::Trainer trainer(tiny_xcit(1, 4), data, data, fresh);
    CHECK(trainer.start_epoch() == 0);  // a new run: epoch 0, a fresh optimizer and schedule
    const nn::NamedTensors now = trainer.model().state_dict();
    REQUIRE(now.size() == saved.size());
    for (size_t i = 0; i < now.size(); ++i) CHECK(max_abs(sub(now[i].second, saved[i].second)) == 0);
  }
  train::TrainOptions other = step_options();
  other.initial_checkpoint = dir.path();
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 10), data, data, other),
                    Catch::Contains("--initial-checkpoint") && Catch::Contains("does not fit"));
  other.initial_checkpoint = "/nonexistent/weights.safetensors";
  CHECK_THROWS_WITH(train::Trainer(tiny_xcit(1, 4), data, data, other),
                    Catch::Contains("/nonexistent/weights.safetensors"));
}

TEST_CASE("evaluation prints progress lines every log interval and at the end", "[train]") {
  auto data = std::make_shared<Squares>(20);
  auto model = tiny_xcit(1, 4);
  data::TransformOptions t;
  t.in_chans = 1;
  t.img_size = 28;
  t.mean = {0.5};
  t.std = {0.5};
  t.crop_pct = 1.0;
  data::LoaderOptions lo;
  lo.batch_size = 4;
  lo.shuffle = false;
  lo.workers = 0;
  data::DataLoader loader(data, data::create_transform(t), lo);  // 5 batches
  const std::string out = stderr_of([&] { train::evaluate(*model, loader, 0, std::nullopt, nullptr, {2, "Test"}); });
  INFO(out);
  CHECK(out.find("Test: [   2/5]") != std::string::npos);
  CHECK(out.find("Test: [   4/5]") != std::string::npos);
  CHECK(out.find("Test: [   5/5]") != std::string::npos);
  CHECK(out.find("Test: [   3/5]") == std::string::npos);
  CHECK(out.find("img/s  eta 0:00:0") != std::string::npos);
  CHECK(stderr_of([&] { train::evaluate(*model, loader, 0, std::nullopt, nullptr, {0, "Test"}); }).empty());
}

TEST_CASE("progress lines hold a checkpoint path of any length", "[train]") {
  // The trainer's lines were 512-byte buffers: a long run folder was cut off in "new best" lines.
  auto data = std::make_shared<Squares>(16);
  TempDir dir;
  const std::string deep =
      (fs::path(dir.path()) / std::string(200, 'a') / std::string(200, 'b') / std::string(200, 'c')).string();
  train::TrainOptions o = step_options();
  o.output = deep;
  o.verbose = true;
  manual_seed(0);
  const std::string out = stderr_of([&] { train::Trainer(tiny_xcit(1, 4), data, data, o).fit(); });
  CHECK(out.find((fs::path(deep) / "model_best.safetensors").string()) != std::string::npos);
}

// What the first checkpoint's save needs is checked when the run starts, not an epoch later.
TEST_CASE("a run whose checkpoints could not be saved stops before its first step, saying why", "[train]") {
  TempDir dir;
  auto train_set = std::make_shared<Squares>(32), eval_set = std::make_shared<Squares>(8);
  // A model built in code whose name is not UTF-8: its model file, which every checkpoint records,
  // does not read back (the metadata check of the save would refuse it).
  models::ModelSpec spec = models::xcit_spec(tiny_xcit_config(1, 4));
  spec.name = "caf\xE9";
  manual_seed(1);
  auto model = models::build_model(spec);
  const std::string out = (fs::path(dir.path()) / "run").string();
  CHECK_THROWS_WITH(
      train::Trainer(model, train_set, eval_set, first_epoch_saved(out, 1)),
      Catch::Contains("every checkpoint records the model's file") && Catch::Contains("not valid UTF-8 (byte 0xE9)"));
  CHECK_FALSE(fs::exists(fs::path(out) / "summary.csv"));
  CHECK_FALSE(fs::exists(fs::path(out) / "args.yaml"));
  // An output that is a file, not a folder.
  const std::string file = dir.file("not_a_folder");
  std::ofstream(file) << "x";
  CHECK_THROWS(train::Trainer(tiny_xcit(1, 4), train_set, eval_set, first_epoch_saved(file, 1)));
  // Room for one checkpoint: a size no disk has.
  CHECK_THROWS_WITH(train::check_room_for_checkpoint(dir.path(), int64_t{1} << 62),
                    Catch::Contains("train: " + dir.path() + " has ") &&
                        Catch::Contains("free and one checkpoint needs about 4398046511104 MiB"));
  CHECK_NOTHROW(train::check_room_for_checkpoint(dir.path(), 1 << 20));
}
