// The profiler's device instrument (autograd/profiler.h, autograd/roofline.h): on device cuda every
// kernel call counts its launches and its operands' bytes, and the H100 roofline model prices it;
// CPU kernels have none of these columns.
#include <catch2/catch.hpp>

#include "tessera/autograd/profiler.h"
#include "tessera/autograd/roofline.h"
#include "tessera/core/backend.h"
#include "tessera/ops/ops.h"

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
    CHECK(totals.launches == (dtype == DType::Float32 ? 2 : 1));
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
