// CUDA Graphs (core/graph.h, cuda/graph.cpp, train/step_graph.h): a capture records and runs
// nothing, a replay does the recorded work again on the same memory, what a capture cannot hold
// is refused with a message and leaves the device as it was, and a training step replayed from a
// graph ends with the weights of eager steps, bit for bit.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "tessera/core/backend.h"
#include "tessera/core/graph.h"
#include "tessera/models/xcit.h"
#include "tessera/nn/layers.h"
#include "tessera/ops/ops.h"
#include "tessera/train/optimizer.h"
#include "tessera/train/step_graph.h"
#include "tessera/train/trainer.h"
#include "tests/device_check.h"
#include "tests/train_fixtures.h"

using namespace tessera;

namespace {

Device cuda() { return testing::test_devices().front(); }

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).to_vector<double>(); }

}  // namespace

TEST_CASE("a captured graph runs nothing until replayed, then the recorded work at each replay", "[cuda][graph]") {
  Tensor x = ones({5}, DType::Float32, cuda());
  Tensor out;
  const std::unique_ptr<DeviceGraph> graph = capture_graph(cuda(), [&] {
    NoGradGuard no_grad;
    x.copy_(x * 2.0 + 1.0);  // a temporary of the capture's own pool, then the write
    out = x.sum();
  });
  CHECK(graph->nodes() >= 3);
  CHECK(values(x) == std::vector<double>(5, 1.0));  // recorded, not run
  graph->replay();
  CHECK(values(x) == std::vector<double>(5, 3.0));
  CHECK(values(out) == std::vector<double>{15.0});
  graph->replay();
  CHECK(values(x) == std::vector<double>(5, 7.0));
  CHECK(values(out) == std::vector<double>{35.0});
}

TEST_CASE("a graph's memory is its own: eager tensors made after the capture are never written by a replay",
          "[cuda][graph]") {
  const Tensor x = full({1000}, 2.0, DType::Float32, cuda());
  Tensor out;
  const auto graph = capture_graph(cuda(), [&] {
    NoGradGuard no_grad;
    const Tensor a = x * 3.0, b = a + 1.0, c = b * b;  // freed inside the capture: their blocks stay the graph's
    out = c - 1.0;
  });
  std::vector<Tensor> eager;
  for (int i = 0; i < 8; ++i) eager.push_back(full({1000}, 5.0, DType::Float32, cuda()));
  graph->replay();
  CHECK(values(out) == std::vector<double>(1000, 48.0));
  for (const Tensor& t : eager) CHECK(values(t) == std::vector<double>(1000, 5.0));
}

TEST_CASE("host data a capture copies to the device is kept by the graph", "[cuda][graph]") {
  const Tensor x = ones({3}, DType::Float32, cuda());
  Tensor out;
  const auto graph = capture_graph(cuda(), [&] {
    std::vector<float> host{1, 2, 3};  // gone when the capture ends
    out = from_vector(host, {3}).to(cuda()) + x;
  });
  graph->replay();
  graph->replay();
  CHECK(values(out) == std::vector<double>{2, 3, 4});
}

TEST_CASE("a capture refuses host reads, synchronisations and host random draws with a message, and runs nothing",
          "[cuda][graph]") {
  Tensor x = ones({4}, DType::Float32, cuda());
  const auto refused = [&](const std::function<void()>& work, const std::string& said) {
    INFO(said);
    CHECK_THROWS_AS(capture_graph(cuda(), work), CaptureError);
    CHECK_THROWS_WITH(capture_graph(cuda(), work), Catch::Contains(said));
    CHECK_FALSE(capture_in_progress());
    CHECK(values(x) == std::vector<double>(4, 1.0));  // nothing recorded ran; the device works on
  };
  refused(
      [&] {
        NoGradGuard no_grad;
        x.copy_(x + 1.0);
        (void)x.sum().item();
      },
      "to(cpu) inside a CUDA Graph capture");
  refused([&] { synchronize(cuda()); }, "synchronize inside a CUDA Graph capture");
  refused([&] { (void)default_generator().uniform(); }, "a random draw on the host");
  CHECK_THROWS_WITH(capture_graph(Device::cpu(), [] {}), Catch::Contains("cpu has no graphs"));
  // An error of the work itself passes through as it is, the capture abandoned.
  CHECK_THROWS_WITH(capture_graph(cuda(), [] { throw Error("the work's own error"); }), "the work's own error");
  CHECK_FALSE(capture_in_progress());
}

TEST_CASE("random draws in a graph are new at each replay: those of the same draws made eagerly", "[cuda][graph]") {
  Generator eager(9), graphed(9);
  Generator values_of_x(2);
  const Tensor x = randn({4, 17, 16}, DType::Float32, &values_of_x, cuda());
  const auto draws = [&](Generator& gen) {
    // x * 2 frees its 0-d factor before the first draw: the random stream's state must not take
    // that block, which each replay fills with 2 again.
    return std::vector<Tensor>{dropout(x * 2.0, 0.5, true, &gen), randn({3}, DType::Float64, &gen, cuda())};
  };
  std::vector<Tensor> out;
  const auto graph = capture_graph(cuda(), [&] { out = draws(graphed); });
  CHECK(graphed.offset() == 0);  // the capture itself drew nothing
  for (int step = 0; step < 3; ++step) {
    INFO("replay " << step);
    const std::vector<Tensor> expected = draws(eager);
    graph->replay();
    CHECK(values(out[0]) == values(expected[0]));
    CHECK(values(out[1]) == values(expected[1]));
    CHECK(graphed.offset() == eager.offset());
    // An eager draw between replays takes the next numbers, and the next replay those after it.
    CHECK(values(rand({2}, DType::Float32, &graphed, cuda())) == values(rand({2}, DType::Float32, &eager, cuda())));
  }
  graphed.seed(4);
  eager.seed(4);
  const std::vector<Tensor> reseeded = draws(eager);
  graph->replay();
  CHECK(values(out[0]) == values(reseeded[0]));  // the replay reads the seed as it is now
}

TEST_CASE("a failed check of a replayed kernel is reported at the next synchronisation", "[cuda][graph]") {
  const Tensor logits = zeros({2, 3}, DType::Float32, cuda());
  Tensor labels = from_vector(std::vector<int64_t>{0, 1}, {2}).to(cuda());
  Tensor loss;
  const auto graph = capture_graph(cuda(), [&] {
    NoGradGuard no_grad;
    loss = cross_entropy(logits, labels);
  });
  graph->replay();
  CHECK(values(loss)[0] == Approx(std::log(3.0)));
  {
    NoGradGuard no_grad;
    labels.copy_(from_vector(std::vector<int64_t>{0, 7}, {2}).to(cuda()));
  }
  graph->replay();
  CHECK_THROWS_WITH(synchronize(cuda()), Catch::Contains("cross_entropy: target") && Catch::Contains("7"));
}

namespace {

// A small XCiT on `device` with the given dropout (its conv stem has BatchNorm: buffers move too).
std::shared_ptr<models::Model> small_xcit(Device device, double drop) {
  manual_seed(5);
  models::XcitConfig c;
  c.img_size = 16, c.patch_size = 4, c.embed_dim = 16, c.depth = 1, c.num_heads = 2, c.mlp_ratio = 2;
  c.in_chans = 1, c.num_classes = 4, c.drop_rate = drop, c.drop_path_rate = drop;
  auto m = std::make_shared<models::Xcit>(c);
  m->to(device);
  m->train();
  return m;
}

train::TrainOptions graph_options(bool graph) {
  train::TrainOptions o = testing::square_options("", 4);  // Squares' 28x28 images, at the model's 16
  o.epochs = 1;
  o.max_train_batches = 4;  // two warm-up steps, the capture, a replay
  o.max_eval_batches = 1;
  o.lr = 2e-3;
  o.warmup_epochs = 0;
  o.mixup.mixup_alpha = 0.8;  // host-side randomness feeds the static inputs
  o.model_ema = true;
  o.model_ema_decay = 0.9;
  o.clip_grad = 1.0;
  o.cuda_graph = graph;
  return o;
}

}  // namespace

TEST_CASE("a training step replayed from a CUDA Graph ends with the weights of eager steps, bit for bit",
          "[cuda][graph][train]") {
  auto data = std::make_shared<testing::Squares>(48);
  // With dropout and drop path: the graph's draws are the eager steps' draws.
  auto eager = small_xcit(cuda(), 0.1), graphed = small_xcit(cuda(), 0.1);
  train::Trainer(eager, data, data, graph_options(false)).fit();
  const uint64_t eager_offset = default_generator().offset();
  train::Trainer trainer(graphed, data, data, graph_options(true));
  trainer.fit();
  CHECK(default_generator().offset() == eager_offset);
  INFO("why the step ran eagerly: " << trainer.cuda_graph_fallback());
  CHECK(trainer.cuda_graph_captured());
  const nn::NamedTensors a = eager->state_dict(), b = graphed->state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(values(a[i].second) == values(b[i].second));
  }
}

TEST_CASE("StepGraph captures after its warm-up, replays, and falls back to eager steps where it must",
          "[cuda][graph][train]") {
  auto model = small_xcit(cuda(), 0.0);
  train::AdamW opt(train::param_groups(*model, 0.05), 1e-3);
  opt.set_capturable(true);
  std::vector<std::string> said;
  int bodies = 0;
  train::StepGraph step(
      cuda(),
      [&](const std::vector<Tensor>& in) {
        ++bodies;
        const Tensor loss = cross_entropy(model->forward(in[0]), in[1]);
        loss.backward();
        opt.step(train::UpdateOptions{});
        opt.zero_grad();
        return std::vector<Tensor>{loss.detach()};
      },
      1, [&](const std::string& line) { said.push_back(line); });
  Generator gen(1);
  const Tensor images = randn({4, 1, 16, 16}, DType::Float32, &gen);
  const Tensor labels = from_vector(std::vector<int64_t>{0, 1, 2, 0}, {4});
  for (int i = 0; i < 4; ++i) {
    opt.begin_step();
    step.run({images, labels});
  }
  CHECK(step.captured());
  CHECK(bodies == 2);  // the warm-up step and the capture; the rest were replays
  REQUIRE(said.size() == 1);
  CHECK_THAT(said[0], Catch::Contains("captured"));
  CHECK(opt.state_dict().front().second.to_vector<int64_t>()[0] == 4);  // every replay counted

  // Another batch size runs eagerly, once said.
  opt.begin_step();
  step.run({images.narrow(0, 0, 2), labels.narrow(0, 0, 2)});
  CHECK(bodies == 3);
  CHECK_THAT(said.back(), Catch::Contains("other shapes"));

  // A step that reads a value on the host cannot be captured: every step eager.
  int reads = 0;
  train::StepGraph eager_only(
      cuda(),
      [&](const std::vector<Tensor>& in) {
        ++reads;
        const Tensor logits = model->forward(in[0]).detach();
        (void)logits.sum().item();
        return std::vector<Tensor>{logits};
      },
      0, [&](const std::string& line) { said.push_back(line); });
  const Tensor first = eager_only.run({images})[0];
  eager_only.run({images});
  CHECK_FALSE(eager_only.captured());
  CHECK_THAT(eager_only.fallback_reason(), Catch::Contains("to(cpu) inside a CUDA Graph capture"));
  CHECK(reads == 3);  // the failed capture's call ran again eagerly, and so did the next
  CHECK(values(first).size() == 16);
}

TEST_CASE("an optimizer that is not capturable says so, and a capturable one needs every gradient",
          "[cuda][graph][train]") {
  auto model = small_xcit(cuda(), 0.0);
  train::SGD sgd(train::param_groups(*model, 0.0), 0.1);
  CHECK_THROWS_WITH(sgd.set_capturable(true), Catch::Contains("not capturable"));
  train::AdamW adam(train::param_groups(*model, 0.0), 0.1);
  adam.set_capturable(true);
  CHECK_THROWS_WITH(adam.step(), Catch::Contains("follows begin_step()"));
  adam.begin_step();
  CHECK_THROWS_WITH(adam.step(), Catch::Contains("has no gradient"));
}
