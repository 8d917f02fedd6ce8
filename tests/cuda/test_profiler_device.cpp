// The profiler's device instrument (autograd/profiler.h, autograd/roofline.h): on device cuda every
// kernel call counts what it queues (kernels, library calls, memory operations) and its operands'
// bytes, and the H100 roofline model prices it; what a profiled training step queues is exactly
// what a CUDA Graph of the same step holds; device times come from timing marks read at the end,
// or from synchronising around each call; CPU kernels have none of these columns.
#include <catch2/catch.hpp>

#include "tessera/autograd/profiler.h"
#include "tessera/autograd/roofline.h"
#include "tessera/core/backend.h"
#include "tessera/core/graph.h"
#include "tessera/ops/ops.h"
#include "tests/reduced_models.h"

using namespace tessera;

namespace {
const KernelSummary& row(const std::vector<KernelSummary>& rows, const std::string& name) {
  for (const KernelSummary& r : rows)
    if (r.phase == "forward" && r.name == name) return r;
  FAIL("no forward row " << name);
  return rows.front();
}
}  // namespace

TEST_CASE("device kernels count their launches, operand bytes and roofline time", "[cuda][profiler]") {
  const Device dev = Device::cuda();
  Generator gen(5);
  for (DType dtype : {DType::Float32, DType::Float16}) {
    CAPTURE(dtype_name(dtype));
    const int64_t element = static_cast<int64_t>(dtype_size(dtype));
    Tensor x = randn({64, 32}, DType::Float32, &gen).to(dtype).to(dev);
    Tensor w = randn({48, 32}, DType::Float32, &gen).to(dtype).to(dev);
    Profiler profiler;
    Tensor y = linear(x, w, Tensor());
    if (dtype == DType::Float32) y = relu(y);  // (element-wise kernels on cuda: float32 and float64)
    synchronize(dev);
    profiler.stop();

    const std::vector<KernelSummary> rows = profiler.summary();
    const KernelSummary gemm = row(rows, "matmul");
    CHECK(gemm.calls == 1);
    CHECK(gemm.launches == 1);  // the one library call
    CHECK(gemm.library_calls == 1);
    CHECK(gemm.memory_ops == 0);
    CHECK(gemm.bytes == (64 * 32 + 48 * 32 + 64 * 48) * element);
    const bool tf32 = allow_tf32();
    const RooflineTime expected =
        roofline(h100_sxm(), 2.0 * 64 * 32 * 48, static_cast<double>(gemm.bytes), 1, element, tf32);
    CHECK(gemm.model_ms * 1e3 == Approx(expected.total_us()));
    CHECK(gemm.model_parts.compute_us == Approx(expected.compute_us));
    CHECK(gemm.model_parts.launch_us == Approx(h100_sxm().launch_us));
    if (dtype == DType::Float32) {
      const KernelSummary act = row(rows, "unary");
      CHECK(act.launches == 1);
      CHECK(act.bytes == 2 * 64 * 48 * element);  // read x, write y
      // A tiny kernel: the launch dominates the model.
      CHECK(act.model_ms * 1e3 == Approx(h100_sxm().launch_us + static_cast<double>(act.bytes) / 3.35e6));
    }

    const DeviceTotals totals = profiler.device_totals();
    CHECK(totals.calls == static_cast<int64_t>(profiler.events().size()));
    CHECK(totals.launches.total() == (dtype == DType::Float32 ? 2 : 1));
    CHECK(totals.launches.library_calls == 1);
    CHECK(totals.outside_calls == 0);
    CHECK(totals.macs == 64 * 32 * 48);
    CHECK(profiler.table().find("roofline") != std::string::npos);
  }
}

TEST_CASE("CPU kernels have no launches, bytes or model time", "[cuda][profiler]") {
  Generator gen(6);
  Tensor x = randn({8, 8}, DType::Float32, &gen);
  Profiler profiler;
  (void)relu(x);
  profiler.stop();
  const DeviceTotals totals = profiler.device_totals();
  CHECK(totals.calls == 0);
  CHECK(totals.model_ms == 0);
  REQUIRE(profiler.events().size() == 1);
  CHECK(profiler.events()[0].launches == 0);
  CHECK(profiler.table().find("roofline") == std::string::npos);
}

TEST_CASE("what a profiled training step queues is what a CUDA Graph of the step holds, node for node",
          "[cuda][profiler][graph]") {
  const Device dev = Device::cuda();
  const auto check_model = [&](const std::shared_ptr<models::Model>& model) {
    model->to(dev);
    model->train(true);
    Generator gen(9);
    const Tensor images = randn({2, 3, 32, 32}, DType::Float32, &gen).to(dev);
    const Tensor labels = from_vector(std::vector<int64_t>{1, 7}, {2}).to(dev);
    const auto step = [&] {
      Tensor loss = cross_entropy(model->forward(images), labels);
      loss.backward();
      NoGradGuard no_grad;
      for (Tensor p : model->parameters()) p.add_(p.grad(), -1e-3);
      model->zero_grad();
    };
    step();  // warm-up: the algorithm caches and the allocator's blocks
    Profiler profiler;
    step();
    profiler.stop();
    const DeviceTotals totals = profiler.device_totals();
    const std::unique_ptr<DeviceGraph> graph = capture_graph(dev, step);
    INFO(profiler.table(20));
    CHECK(totals.outside_calls == 0);
    CHECK(totals.launches.library_calls > 0);  // the GEMMs (and convolutions) are counted
    CHECK(totals.launches.total() == graph->nodes());
  };
  SECTION("XCiT") { check_model(testing::xcit_reduced()); }
  SECTION("CaiT") { check_model(testing::cait_reduced()); }
  SECTION("CoaT-Lite") { check_model(testing::coat_reduced(0)); }
}

TEST_CASE("device times come from marks read at the end, or from synchronising around each call", "[cuda][profiler]") {
  const Device dev = Device::cuda();
  Generator gen(11);
  const Tensor x = randn({64, 32}, DType::Float32, &gen).to(dev), w = randn({48, 32}, DType::Float32, &gen).to(dev);
  for (DeviceTiming timing : {DeviceTiming::Marks, DeviceTiming::Synchronize}) {
    CAPTURE(timing == DeviceTiming::Marks ? "marks" : "synchronize");
    Profiler profiler(timing);
    Tensor y = relu(linear(x, w, Tensor()));
    profiler.stop();
    REQUIRE(profiler.events().size() == 2);
    double previous_end = 0;
    for (const KernelEvent& e : profiler.events()) {
      CHECK(e.on_device);
      CHECK(e.duration_us >= 0);
      CHECK(e.host_us >= 0);
      CHECK(e.start_us >= previous_end - 1e-3);  // in order on the stream
      previous_end = e.start_us + e.duration_us;
    }
    CHECK(previous_end <= profiler.wall_ms() * 1e3 + 1e-3);
  }
}
