// Training utilities: learning-rate schedules (closed forms and timm's values), model EMA, the
// TensorBoard event encoding (golden bytes, CRC-32C vectors, files), the checkpoint saver (keep-K,
// best, last, crash safety, resume) and the output folder's text files.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gradcheck.h"
#include "tessera/nn/layers.h"
#include "tessera/io/safetensors.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/ema.h"
#include "tessera/train/output.h"
#include "tessera/train/scheduler.h"
#include "tessera/train/tensorboard.h"

using namespace tessera;
using namespace tessera::train;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed with the object.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("tessera_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    if (hex[i] == ' ') {
      --i;
      continue;
    }
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), ac.numel() * ac.element_size()) == 0;
}

// A module with a shared child (two paths to one Linear, as CoaT shares its CPE) and a BatchNorm
// with an integer buffer.
class Tiny : public nn::Module {
 public:
  Tiny() {
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 2));
    register_module("alias", lin);
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(2));
    set(0.0);
  }
  // Deterministic weights shifted by `shift`.
  void set(double shift) {
    NoGradGuard no_grad;
    lin->weight.copy_(from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}) + shift);
    lin->bias.copy_(from_vector(std::vector<float>{-1, 1}, {2}) + shift);
    bn->num_batches_tracked.fill_(7 + shift);
  }
  std::shared_ptr<nn::Linear> lin;
  std::shared_ptr<nn::BatchNorm2d> bn;
};

const Tensor& entry(const nn::NamedTensors& tensors, const std::string& key) {
  for (const auto& [name, t] : tensors)
    if (name == key) return t;
  FAIL("no entry " << key);
  static Tensor none;
  return none;
}

}  // namespace

// ---- scheduler --------------------------------------------------------------------------------

TEST_CASE("schedules match timm's per-update schedulers", "[scheduler]") {
  // PYTHONPATH=/opt/timm /usr/bin/python3 (timm 1.0.31): for each kw below,
  //   opt = torch.optim.SGD([p], lr=5e-4)
  //   s, _ = timm.scheduler.create_scheduler_v2(opt, num_epochs=10, warmup_lr=1e-6, min_lr=1e-5,
  //            step_on_epochs=False, updates_per_epoch=100, **kw)
  //   for t in steps: s.step_update(num_updates=t); print("%.17g" % opt.param_groups[0]['lr'])
  const std::vector<int64_t> steps{0, 1, 37, 99, 100, 101, 250, 500, 777, 999, 1000, 1100};
  struct Case {
    const char* name;
    ScheduleOptions options;
    std::vector<double> timm;
  };
  ScheduleOptions base;
  base.lr = 5e-4;
  base.total_steps = 1000;  // 10 epochs × 100 updates
  base.warmup_steps = 100;
  base.warmup_lr = 1e-6;
  base.min_lr = 1e-5;
  ScheduleOptions prefix = base, step = base;
  prefix.warmup_prefix = true;
  step.decay_steps = 300;  // decay_epochs=3
  step.decay_rate = 0.5;
  const std::vector<Case> cases{
      {"cosine",
       base,  // kw: sched='cosine', warmup_epochs=1
       {9.9999999999999995e-07, 5.9899999999999994e-06, 0.00018563, 0.00049500999999999994, 0.00048800884649231267,
        0.00048776984967968906, 0.00042824116139070413, 0.00025500000000000002, 6.7704474801342626e-05,
        1.0001209025544738e-05, 1.0000000000000001e-05, 1.0000000000000001e-05}},
      {"cosine",
       prefix,  // kw: sched='cosine', warmup_epochs=1, warmup_prefix=True
       {9.9999999999999995e-07, 5.9899999999999994e-06, 0.00018563, 0.00049500999999999994, 0.00050000000000000001,
        0.00049999879097445529, 0.00047329659842615011, 0.00033070916362186215, 0.00012567784957345874,
        2.2230150320310909e-05, 2.1991153507687383e-05, 1.0000000000000001e-05}},
      {"step",
       step,  // kw: sched='step', warmup_epochs=1, decay_epochs=3, decay_rate=0.5
       {9.9999999999999995e-07, 5.9899999999999994e-06, 0.00018563, 0.00049500999999999994, 0.00050000000000000001,
        0.00050000000000000001, 0.00050000000000000001, 0.00025000000000000001, 0.000125, 6.2500000000000001e-05,
        6.2500000000000001e-05, 6.2500000000000001e-05}},
      {"constant",
       base,  // kw: sched='constant', warmup_epochs=1
       {9.9999999999999995e-07, 5.9899999999999994e-06, 0.00018563, 0.00049500999999999994, 0.00050000000000000001,
        0.00050000000000000001, 0.00050000000000000001, 0.00050000000000000001, 0.00050000000000000001,
        0.00050000000000000001, 0.00050000000000000001, 0.00050000000000000001}},
  };
  for (const Case& c : cases) {
    const LrScheduler s = create_scheduler(c.name, c.options);
    for (size_t i = 0; i < steps.size(); ++i) {
      INFO(c.name << (c.options.warmup_prefix ? " (warmup prefix)" : "") << " at step " << steps[i]);
      CHECK(s.lr_at(steps[i]) == Approx(c.timm[i]).epsilon(1e-15).margin(0));
    }
  }
}

TEST_CASE("schedules follow their closed forms", "[scheduler]") {
  const double pi = 3.14159265358979323846;
  ScheduleOptions o;
  o.lr = 0.1;
  o.total_steps = 50;
  o.min_lr = 0.001;
  o.warmup_steps = 0;
  const LrScheduler cosine(ScheduleKind::Cosine, o);
  for (int64_t t : {0, 10, 25, 49})
    CHECK(cosine.lr_at(t) == Approx(0.001 + 0.5 * (0.1 - 0.001) * (1 + std::cos(pi * t / 50))).epsilon(1e-14));
  CHECK(cosine.lr_at(0) == Approx(0.1));
  CHECK(cosine.lr_at(25) == Approx(0.0505));
  CHECK(cosine.lr_at(50) == 0.001);
  CHECK(cosine.lr_at(1000000) == 0.001);
  o.decay_steps = 7;
  o.decay_rate = 0.1;
  const LrScheduler step(ScheduleKind::Step, o);
  CHECK(step.lr_at(6) == 0.1);
  CHECK(step.lr_at(7) == Approx(0.01));
  CHECK(step.lr_at(20) == Approx(0.001));
  CHECK(create_scheduler("const", o).lr_at(12345) == 0.1);
}

TEST_CASE("scheduler errors", "[scheduler]") {
  ScheduleOptions o;
  o.lr = 0.1;
  CHECK_THROWS_WITH(create_scheduler("cosine", o), Catch::Contains("total_steps > 0"));
  CHECK_THROWS_WITH(create_scheduler("step", o), Catch::Contains("decay_steps > 0"));
  CHECK_THROWS_WITH(create_scheduler("poly", o), Catch::Contains("'poly'") && Catch::Contains("cosine"));
  o.total_steps = 10;
  CHECK_THROWS_WITH(create_scheduler("cosine", o).lr_at(-1), Catch::Contains("step must be >= 0"));
  o.lr = NAN;
  CHECK_THROWS_WITH(create_scheduler("constant", o), Catch::Contains("lr must be finite"));
}

// ---- EMA --------------------------------------------------------------------------------------

TEST_CASE("ModelEma averages floating tensors and copies integer buffers", "[ema]") {
  Tiny model;
  ModelEma ema(model, 0.9);
  CHECK(ema.decay_at(1) == 0.0);  // timm ModelEmaV3: the first update copies the model
  CHECK(ema.decay_at(2) == 0.9);
  model.set(10.0);
  ema.update(model, 1);
  CHECK(entry(ema.state_dict(), "lin.weight").to_vector<float>() == std::vector<float>{11, 12, 13, 14, 15, 16});
  // Two more updates: ema = 0.9·ema + 0.1·model, each time.
  std::vector<double> expect{11, 12, 13, 14, 15, 16};
  for (int64_t step = 2; step <= 3; ++step) {
    model.set(static_cast<double>(step));
    ema.update(model, step);
    for (size_t i = 0; i < expect.size(); ++i) expect[i] = 0.9 * expect[i] + 0.1 * (1.0 + i + step);
  }
  const std::vector<float> got = entry(ema.state_dict(), "lin.weight").to_vector<float>();
  for (size_t i = 0; i < expect.size(); ++i) CHECK(got[i] == Approx(expect[i]).epsilon(1e-6));
  CHECK(entry(ema.state_dict(), "bn.num_batches_tracked").item() == 10);  // copied: 7 + 3
  CHECK(entry(ema.state_dict(), "bn.num_batches_tracked").dtype() == DType::Int64);
  // The alias path shares the averaged tensor.
  CHECK(entry(ema.state_dict(), "alias.weight").is_same(entry(ema.state_dict(), "lin.weight")));

  Tiny eval_copy;
  ema.copy_to(eval_copy);
  CHECK(bit_equal(eval_copy.lin->weight, entry(ema.state_dict(), "lin.weight")));
  CHECK(eval_copy.bn->num_batches_tracked.item() == 10);
}

TEST_CASE("ModelEma warm-up, dtypes, state round trip and errors", "[ema]") {
  Tiny model;
  ModelEma warm(model, 0.9998, true);
  CHECK(warm.decay_at(1) == 0.0);
  for (int64_t step : {2, 11, 1001, 100000000})  // timm: min(decay, 1 - (1 + t)^(-2/3)), t = step - 1
    CHECK(warm.decay_at(step) == Approx(std::min(0.9998, 1.0 - std::pow(static_cast<double>(step), -2.0 / 3.0))));
  CHECK(warm.decay_at(100000000) == 0.9998);

  model.to(DType::Float64);
  ModelEma ema64(model, 0.5);
  CHECK(entry(ema64.state_dict(), "lin.weight").dtype() == DType::Float64);
  Tiny model32;
  ModelEma ema(model32, 0.5);
  model32.set(4.0);
  ema.update(model32, 2);
  ModelEma restored(Tiny(), 0.5);
  restored.load_state_dict(ema.state_dict());
  for (const auto& [name, t] : ema.state_dict()) CHECK(bit_equal(entry(restored.state_dict(), name), t));

  nn::NamedTensors bad = ema.state_dict();
  bad.pop_back();
  CHECK_THROWS_WITH(restored.load_state_dict(bad), Catch::Contains("ModelEma") && Catch::Contains("missing"));
  bad = ema.state_dict();
  bad[0].second = zeros({5});
  bad.emplace_back("extra", zeros({1}));
  CHECK_THROWS_WITH(restored.load_state_dict(bad),
                    Catch::Contains("expected [2, 3]") && Catch::Contains("unexpected 'extra'"));
  nn::Linear other(3, 2);
  CHECK_THROWS_WITH(ema.update(other, 2), Catch::Contains("ModelEma") && Catch::Contains("entries"));
  CHECK_THROWS_WITH(ema.update(model32, 0), Catch::Contains("step must be >= 1"));
  CHECK_THROWS_WITH(ModelEma(model32, 1.5), Catch::Contains("decay"));
}

// ---- TensorBoard ------------------------------------------------------------------------------

TEST_CASE("CRC-32C known vectors", "[tensorboard]") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(masked_crc32c("", 0) == 0xA282EAD8u);
  // RFC 3720 (iSCSI) appendix B.4: 32 bytes of zeros, of 0xFF, and ascending 0..31.
  std::string zeros(32, '\0'), ones(32, '\xff'), ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  CHECK(crc32c(zeros.data(), 32) == 0x8A9136AAu);
  CHECK(crc32c(ones.data(), 32) == 0x62A8AB43u);
  CHECK(crc32c(ascending.data(), 32) == 0x46DD794Eu);
}

TEST_CASE("event encoding matches the golden vector byte for byte", "[tensorboard]") {
  // Bytes composed by hand from tensorboard's event.proto / summary.proto field numbers and the
  // TFRecord framing (train/tensorboard.h), checked by loading the file in TensorBoard: event 1 is
  // 32 bytes (length field 2000000000000000, length CRC 29eda950).
  const std::string e0 = from_hex("0900000040fc54d9411a0d627261696e2e4576656e743a32");
  const std::string e1 = from_hex("0900006040fc54d941100a2a130a110a0a747261696e2f6c6f73731500002040");
  CHECK(tfevents::file_version_event(1700000000.0) == e0);
  CHECK(tfevents::scalar_event(1700000001.5, 10, "train/loss", 2.5f) == e1);
  const std::string file = from_hex(
      "1800000000000000 a37f4b22 0900000040fc54d9411a0d627261696e2e4576656e743a32 eced8f9d"
      "2000000000000000 29eda950 0900006040fc54d941100a2a130a110a0a747261696e2f6c6f73731500002040 7f61544f");
  CHECK(tfevents::record(e0) + tfevents::record(e1) == file);
  // step 0 is omitted (proto3 default); a negative step takes a ten-byte varint.
  CHECK(tfevents::scalar_event(1.0, 0, "a", 1.0f).size() + 2 == tfevents::scalar_event(1.0, 1, "a", 1.0f).size());
  CHECK(tfevents::scalar_event(1.0, -1, "a", 1.0f).size() == tfevents::scalar_event(1.0, 1, "a", 1.0f).size() + 9);
}

TEST_CASE("SummaryWriter writes a readable event file", "[tensorboard]") {
  TempDir dir("tb");
  std::string path, second_path;
  {
    SummaryWriter writer(dir / "run1");
    path = writer.path();
    writer.add_scalar("train/loss", 2.5, 10, 1700000001.5);
    writer.add_scalar("eval/top1", 71.25, 11, 1700000002.0);
    writer.flush();
    SummaryWriter second(dir / "run1");  // same second, same host: a distinct file
    second_path = second.path();
  }
  CHECK(path != second_path);
  CHECK(fs::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  const std::string bytes = read_bytes(path);
  // Walk the records: valid CRCs, the file_version first, then the two scalars exactly.
  std::vector<std::string> records;
  for (size_t pos = 0; pos < bytes.size();) {
    REQUIRE(pos + 12 <= bytes.size());
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, bytes.data() + pos, 8);
    std::memcpy(&len_crc, bytes.data() + pos + 8, 4);
    CHECK(len_crc == masked_crc32c(bytes.data() + pos, 8));
    REQUIRE(pos + 16 + len <= bytes.size());
    std::memcpy(&data_crc, bytes.data() + pos + 12 + len, 4);
    CHECK(data_crc == masked_crc32c(bytes.data() + pos + 12, len));
    records.push_back(bytes.substr(pos + 12, len));
    pos += 16 + len;
  }
  REQUIRE(records.size() == 3);
  CHECK(records[0].find("brain.Event:2") != std::string::npos);
  CHECK(records[1] == tfevents::scalar_event(1700000001.5, 10, "train/loss", 2.5f));
  CHECK(records[2] == tfevents::scalar_event(1700000002.0, 11, "eval/top1", 71.25f));

  std::ofstream(dir / "file") << "x";
  CHECK_THROWS_WITH(SummaryWriter(dir / "file/sub"), Catch::Contains("SummaryWriter") && Catch::Contains("file/sub"));
}

// ---- checkpoints ------------------------------------------------------------------------------

namespace {

nn::NamedTensors weights_for(double v) { return {{"head.weight", full({2, 3}, v)}, {"head.bias", full({2}, -v)}}; }

nn::NamedTensors state_for(double v) {
  return {{"optimizer.head.weight.step", full({}, v, DType::Int64)}, {"ema.head.weight", full({2, 3}, 2 * v)}};
}

std::vector<std::string> listing(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("CheckpointSaver keeps the last K, the best and last", "[checkpoint]") {
  TempDir dir("ckpt_keep");
  CheckpointSaver saver(dir.path.string(), 2, "top1", true);
  const std::vector<double> metrics{1, 5, 3, 4, 2};
  for (int64_t e = 0; e < 5; ++e) {
    const bool best = saver.save(e, metrics[e], weights_for(e), state_for(e), {{"rng", "seed=42"}});
    CHECK(best == (e <= 1));
  }
  CHECK(saver.saved_epochs() == std::vector<int64_t>{3, 4});
  CHECK(saver.best_epoch() == 1);
  CHECK(saver.best_metric() == 5);
  CHECK(listing(dir) == std::vector<std::string>{"checkpoint-3.safetensors", "checkpoint-3.state.safetensors",
                                                 "checkpoint-4.safetensors", "checkpoint-4.state.safetensors",
                                                 "last.safetensors", "last.state.safetensors", "model_best.safetensors",
                                                 "model_best.state.safetensors"});
  const CheckpointData last = load_checkpoint(dir / "last.safetensors");
  CHECK(last.epoch == 4);
  CHECK(last.metric == 2);
  CHECK(last.metadata.at("rng") == "seed=42");
  CHECK(last.metadata.at("metric_name") == "top1");
  CHECK(bit_equal(entry(last.weights, "head.weight"), full({2, 3}, 4.0)));
  CHECK(entry(last.state, "optimizer.head.weight.step").item() == 4);
  const CheckpointData best = load_checkpoint(dir / "model_best.state.safetensors");  // either file of the pair
  CHECK(best.epoch == 1);
  CHECK(bit_equal(entry(best.weights, "head.bias"), full({2}, -1.0)));
  // The weights file alone is what timm loads: tensors under the model's keys, format pt.
  const SafetensorsReader timm_view = open_safetensors(dir / "checkpoint-4.safetensors");
  CHECK(timm_view.names() == std::vector<std::string>{"head.weight", "head.bias"});
  CHECK(timm_view.metadata().at("format") == "pt");
  CHECK(find_resume(dir.path.string()) == dir / "checkpoint-4.safetensors");

  // A new saver on the same folder (a resumed run) recovers the best, and lower-is-better works.
  CheckpointSaver resumed(dir.path.string(), 2, "top1", true);
  CHECK(resumed.best_epoch() == 1);
  CHECK(resumed.best_metric() == 5);
  TempDir loss_dir("ckpt_loss");
  CheckpointSaver by_loss(loss_dir.path.string(), 3, "loss", false);
  CHECK(by_loss.save(0, 2.0, weights_for(0), state_for(0)));
  CHECK(by_loss.save(1, 1.5, weights_for(1), state_for(1)));
  CHECK_FALSE(by_loss.save(2, 1.7, weights_for(2), state_for(2)));
  CHECK_FALSE(by_loss.save(3, NAN, weights_for(3), state_for(3)));
  CHECK(by_loss.best_epoch() == 1);
}

TEST_CASE("a failed or interrupted save leaves the previous checkpoints usable", "[checkpoint]") {
  TempDir dir("ckpt_crash");
  CheckpointSaver saver(dir.path.string(), 3);
  saver.save(0, 10, weights_for(0), state_for(0));
  saver.save(1, 20, weights_for(1), state_for(1));
  const std::string last_before = read_bytes(dir / "last.safetensors");

  // A weights tensor that cannot be written: the state file of epoch 2 exists, its weights never do.
  nn::NamedTensors broken = weights_for(2);
  broken.emplace_back("undefined", Tensor());
  CHECK_THROWS_WITH(saver.save(2, 30, broken, state_for(2)), Catch::Contains("undefined"));
  CHECK(read_bytes(dir / "last.safetensors") == last_before);
  CHECK(find_resume(dir.path.string()) == dir / "checkpoint-1.safetensors");
  CHECK(saver.best_epoch() == 1);
  CHECK_THROWS_WITH(load_checkpoint(dir / "checkpoint-2.safetensors"),
                    Catch::Contains("checkpoint-2.safetensors") && Catch::Contains("does not exist"));
  // A state tensor that cannot be written: nothing of epoch 2 changes.
  nn::NamedTensors broken_state = state_for(2);
  broken_state.emplace_back("bad", Tensor());
  CHECK_THROWS(saver.save(2, 30, weights_for(2), broken_state));

  // A process killed between the two files of a save that overwrote epoch 1: the weights file is
  // from another save (different checkpoint_id). find_resume skips the pair; load names it.
  fs::copy_file(dir / "checkpoint-0.safetensors", dir / "swap.tmp");
  fs::rename(dir / "swap.tmp", dir / "checkpoint-1.safetensors");  // a new inode, as a rename-based write
  CHECK(find_resume(dir.path.string()) == dir / "checkpoint-0.safetensors");
  CHECK_THROWS_WITH(load_checkpoint(dir / "checkpoint-1.safetensors"),
                    Catch::Contains("checkpoint-1.safetensors") && Catch::Contains("not from the same save"));
  CHECK(load_checkpoint(dir / "last.safetensors").epoch == 1);  // last.* is a separate, intact link

  // Leftover temporaries are cleaned up and an orphan state file is pruned by the next save.
  std::ofstream(dir / "checkpoint-7.safetensors.tmp.999999") << "partial";
  CheckpointSaver restarted(dir.path.string(), 3);
  CHECK_FALSE(fs::exists(dir / "checkpoint-7.safetensors.tmp.999999"));
  CHECK(fs::exists(dir / "checkpoint-2.state.safetensors"));
  restarted.save(3, 30, weights_for(3), state_for(3));
  CHECK_FALSE(fs::exists(dir / "checkpoint-2.state.safetensors"));
  CHECK(find_resume(dir.path.string()) == dir / "checkpoint-3.safetensors");
}

TEST_CASE("a resumed run supersedes later checkpoints of the earlier run", "[checkpoint]") {
  TempDir dir("ckpt_resume");
  {
    CheckpointSaver saver(dir.path.string(), 10);
    for (int64_t e = 0; e < 5; ++e) saver.save(e, static_cast<double>(e), weights_for(e), state_for(e));
  }
  CheckpointSaver saver(dir.path.string(), 10);
  CHECK(saver.best_epoch() == 4);
  // Resumed from epoch 1, the run saves epoch 2 again: epochs 3 and 4 and their best are stale.
  CHECK(saver.save(2, 0.5, weights_for(20), state_for(20)));
  CHECK(saver.saved_epochs() == std::vector<int64_t>{0, 1, 2});
  CHECK(saver.best_epoch() == 2);
  CHECK(find_resume(dir.path.string()) == dir / "checkpoint-2.safetensors");
  CHECK(bit_equal(entry(load_checkpoint(dir / "last.safetensors").weights, "head.weight"), full({2, 3}, 20.0)));
}

TEST_CASE("checkpoint helpers and errors", "[checkpoint]") {
  TempDir dir("ckpt_err");
  CHECK_THROWS_WITH(CheckpointSaver(dir.path.string(), 0), Catch::Contains("keep must be >= 1"));
  CheckpointSaver saver(dir.path.string(), 1);
  CHECK_THROWS_WITH(saver.save(0, 1, weights_for(0), state_for(0), {{"epoch", "3"}}),
                    Catch::Contains("'epoch' is reserved"));
  CHECK_THROWS_WITH(saver.save(-1, 1, weights_for(0), state_for(0)), Catch::Contains("epoch must be >= 0"));
  CHECK_FALSE(find_resume(dir.path.string()).has_value());
  CHECK_FALSE(find_resume(dir / "nope").has_value());
  CHECK_THROWS_WITH(load_checkpoint(dir / "model.bin"),
                    Catch::Contains("model.bin") && Catch::Contains("not a checkpoint file"));
  saver.save(0, 1, weights_for(0), {});  // an empty training state is allowed
  CHECK(load_checkpoint(dir / "checkpoint-0.safetensors").state.empty());
  std::ofstream(dir / "blocker") << "x";
  CHECK_THROWS_WITH(CheckpointSaver(dir / "blocker/sub"), Catch::Contains("blocker/sub"));

  const nn::NamedTensors prefixed = with_prefix("ema.", weights_for(1));
  CHECK(prefixed[0].first == "ema.head.weight");
  nn::NamedTensors mixed = prefixed;
  mixed.emplace_back("optimizer.x.step", zeros({}, DType::Int64));
  const nn::NamedTensors back = strip_prefix("ema.", mixed);
  REQUIRE(back.size() == 2);
  CHECK(back[1].first == "head.bias");
}

// ---- output folder ----------------------------------------------------------------------------

TEST_CASE("python_float writes floats as Python's repr", "[output]") {
  CHECK(python_float(0.0005) == "0.0005");
  CHECK(python_float(0.0001) == "0.0001");
  CHECK(python_float(1e-05) == "1e-05");
  CHECK(python_float(79.32) == "79.32");
  CHECK(python_float(300.0) == "300.0");
  CHECK(python_float(0.1 + 0.2) == "0.30000000000000004");
  CHECK(python_float(-0.0) == "-0.0");
  CHECK(python_float(1e16) == "1e+16");
  CHECK(python_float(1.5e16) == "1.5e+16");
  CHECK(python_float(123456789012345.6) == "123456789012345.6");
  CHECK(python_float(-2.5e-300) == "-2.5e-300");
  CHECK(python_float(NAN) == "nan");
  CHECK(python_float(-INFINITY) == "-inf");
}

TEST_CASE("args.yaml and summary.csv", "[output]") {
  TempDir dir("output");
  write_args_yaml(dir / "args.yaml",
                  {{"model", "xcit_nano_12_p16_224"},
                   {"batch_size", SettingValue::of_int(128)},
                   {"lr", SettingValue()},
                   {"min_lr", SettingValue::of_float(1e-5)},
                   {"experiment", ""},
                   {"split", "1"},
                   {"aa", "rand-m9-mstd0.5-inc1"},
                   {"amp", SettingValue::of_bool(false)},
                   {"scale", SettingValue::of_list({SettingValue::of_float(0.08), SettingValue::of_float(1.0)})}});
  // Sorted keys; floats as PyYAML writes them; strings YAML would read as something else quoted.
  CHECK(read_bytes(dir / "args.yaml") ==
        "aa: rand-m9-mstd0.5-inc1\namp: false\nbatch_size: 128\nexperiment: ''\nlr: null\nmin_lr: 1.0e-05\n"
        "model: xcit_nano_12_p16_224\nscale: [0.08, 1.0]\nsplit: '1'\n");
  CHECK_THROWS_WITH(write_args_yaml(dir / "bad.yaml", {{"a", "1"}, {"a", "2"}}), Catch::Contains("'a' is given twice"));
  CHECK_THROWS_WITH(write_args_yaml(dir / "missing/args.yaml", {{"a", "1"}}), Catch::Contains("missing/args.yaml"));

  const std::string csv = dir / "summary.csv";
  append_summary(csv, {0, 6.9123, 6.8, 0.5, 2.25, 1e-05});
  append_summary(csv, {1, 6.5, 6.25, 1.0, 4.5, 0.0005});
  append_summary(csv, {2, 6.0, NAN, NAN, NAN, 0.0005});
  CHECK(read_bytes(csv) ==
        "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\n"
        "0,6.9123,6.8,0.5,2.25,1e-05\n"
        "1,6.5,6.25,1.0,4.5,0.0005\n"
        "2,6.0,nan,nan,nan,0.0005\n");
  truncate_summary(csv, 0);  // resumed from the epoch-0 checkpoint
  append_summary(csv, {1, 6.4, 6.2, 1.5, 5.0, 0.0005});
  CHECK(read_bytes(csv) ==
        "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr\n"
        "0,6.9123,6.8,0.5,2.25,1e-05\n"
        "1,6.4,6.2,1.5,5.0,0.0005\n");
  truncate_summary(dir / "absent.csv", 3);  // nothing to do
  CHECK_FALSE(fs::exists(dir / "absent.csv"));
}
