// Training on device cuda with the standard trainer, and checkpoints that move between devices:
// a checkpoint written from cuda holds the device's weights bit for bit and resumes on the CPU,
// and the other way round.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tessera/data/dataset.h"
#include "tessera/data/loader.h"
#include "tessera/data/pipeline.h"
#include "tessera/models/xcit.h"
#include "tests/device_check.h"
#include "tests/temp_dir.h"
#include "tests/train_fixtures.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/device_batches.h"
#include "tessera/train/trainer.h"

using namespace tessera;
namespace fs = std::filesystem;
using testing::Squares;

namespace {

// A small XCiT (its conv stem has BatchNorm: buffers move too) on `device`.
std::shared_ptr<models::Model> build(Device device) {
  manual_seed(3);
  models::XcitConfig c;
  c.img_size = 28, c.patch_size = 4, c.embed_dim = 16, c.depth = 1, c.num_heads = 2, c.mlp_ratio = 2;
  c.in_chans = 1, c.num_classes = 4, c.drop_rate = 0.1, c.drop_path_rate = 0.1;
  auto m = std::make_shared<models::Xcit>(c);
  m->to(device);
  return m;
}

train::TrainOptions options(const std::string& output) {
  train::TrainOptions o = testing::square_options(output, 8);
  o.epochs = 2;
  o.lr = 2e-3;
  o.mixup.mixup_alpha = 0.8;  // Mixup, EMA, dropout and drop-path: every random stream moves with the run
  o.model_ema = true;
  o.model_ema_decay = 0.9;
  o.clip_grad = 1.0;
  return o;
}

// The model's state equals the checkpoint's weights bit for bit.
void check_same_bits(const nn::Module& model, const nn::NamedTensors& weights) {
  const nn::NamedTensors state = model.state_dict();
  REQUIRE(state.size() == weights.size());
  for (size_t i = 0; i < state.size(); ++i) {
    INFO(state[i].first);
    CHECK(state[i].second.to_vector<double>() == weights[i].second.to_vector<double>());
  }
}

}  // namespace

TEST_CASE("a run trained on cuda resumes on the CPU, and one trained on the CPU resumes on cuda", "[cuda][train]") {
  const Device dev = testing::test_devices().front();
  auto train_set = std::make_shared<Squares>(16);  // two steps of 8 per epoch
  auto eval_set = std::make_shared<Squares>(8);
  for (const auto& [first, second] : {std::pair{dev, Device::cpu()}, std::pair{Device::cpu(), dev}}) {
    INFO("trained on " << first.str() << ", resumed on " << second.str());
    testing::TempDir dir;
    auto model = build(first);
    train::TrainOptions half = options(dir.path());
    half.stop_after = 1;
    const auto rows = train::Trainer(model, train_set, eval_set, half).fit();
    REQUIRE(rows.size() == 1);
    CHECK(std::isfinite(rows[0].train_loss));
    CHECK(model->device() == first);
    const auto ck = train::load_checkpoint((fs::path(dir.path()) / "last.safetensors").string());
    check_same_bits(*model, ck.weights);  // written from `first`, bit for bit

    auto resumed = build(second);
    train::TrainOptions rest = options(dir.path());
    rest.resume = dir.path();
    train::Trainer trainer(resumed, train_set, eval_set, rest);
    CHECK(trainer.start_epoch() == 1);
    check_same_bits(*resumed, ck.weights);  // loaded onto `second`, bit for bit
    const auto more = trainer.fit();
    REQUIRE(more.size() == 1);
    CHECK(std::isfinite(more[0].train_loss));
    CHECK(resumed->device() == second);
  }
}

TEST_CASE("on cuda the loss is read every --log-interval updates, and a NaN there stops the run", "[cuda][train]") {
  // Reading a loss waits for the device: the trainer reads it at log points only, then stops on a
  // NaN naming the updates since the last read.
  testing::TempDir dir;
  train::TrainOptions o = options(dir.path());
  o.epochs = 6;
  o.log_interval = 3;  // of 4 updates an epoch: reads after updates 3 and 4
  o.lr = 1e30;         // Adam's first update moves every weight by about lr: the next forward overflows
  o.sched = "constant";
  o.warmup_epochs = 0;
  o.clip_grad = 0;
  o.mixup.mixup_alpha = 0;
  o.model_ema = false;
  train::Trainer run(build(Device::cuda()), std::make_shared<Squares>(32), std::make_shared<Squares>(8), o);
  CHECK_THROWS_WITH(run.fit(), Catch::Matches("train: the loss is (NaN|infinite) at epoch [0-9]+, (step 3|in steps 0 "
                                              "to 2 \\(read every --log-interval steps on cuda:0\\)).*",
                                              Catch::CaseSensitive::Yes));
}

TEST_CASE("DeviceBatches hands out the loader's batches on the device, in order, none beyond the epoch's count",
          "[cuda][train]") {
  auto data = std::make_shared<Squares>(40);
  const train::TrainOptions o = testing::square_options("", 8);
  data::TransformOptions t = o.eval_transform;
  t.img_size = 28;
  data::LoaderOptions lo = o.loader;
  lo.seed = 5;
  data::DataLoader loader(data, data::create_transform(t), lo), reference(data, data::create_transform(t), lo);
  std::vector<int64_t> targets_made;
  train::DeviceBatches batches(loader, Device::cuda(), [&](data::Batch& b, int64_t epoch, int64_t index) {
    targets_made.push_back(index);
    return b.labels * 2;  // made on the host, before the copy
  });
  loader.start_epoch(1);
  reference.start_epoch(1);
  batches.start_epoch(1, 3);
  for (int64_t i = 0; i < 3; ++i) {
    const train::DeviceBatches::Item item = batches.next(i);
    const std::optional<data::Batch> expected = reference.next();
    REQUIRE(expected.has_value());
    CHECK(item.images.device() == Device::cuda());
    CHECK(item.count == 8);
    CHECK(item.images.to(Device::cpu()).to_vector<double>() == expected->images.to_vector<double>());
    CHECK(item.targets.to(Device::cpu()).to_vector<double>() == (expected->labels * 2).to_vector<double>());
  }
  CHECK(targets_made == std::vector<int64_t>{0, 1, 2});
  const std::optional<data::Batch> after = loader.next();  // the lookahead stopped at the count
  REQUIRE(after.has_value());
  CHECK(after->index == 3);
  CHECK_THROWS_WITH(batches.next(3), Catch::Contains("batch 3 of an epoch of 3"));
}
