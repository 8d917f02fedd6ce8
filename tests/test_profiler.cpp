// The op profiler (autograd/profiler.h): kernels are timed per (phase, kernel), backward kernels carry
// the autograd node that called them, ProfileRange labels the rest, MACs come from the ops, and
// nothing is observed before or after the profiler's lifetime.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "tessera/io/chrome_trace.h"
#include "tessera/io/json.h"
#include "tessera/ops/ops.h"
#include "tessera/autograd/profiler.h"

using namespace tessera;

namespace {
const KernelSummary* find_row(const std::vector<KernelSummary>& rows, const std::string& phase,
                              const std::string& name) {
  for (const KernelSummary& r : rows)
    if (r.phase == phase && r.name == name) return &r;
  return nullptr;
}
}  // namespace

TEST_CASE("the profiler times every kernel of a training step by phase", "[profiler]") {
  Generator gen(3);
  Tensor x = randn({16, 32}, DType::Float32, &gen);
  Tensor w = randn({24, 32}, DType::Float32, &gen).set_requires_grad(true);
  CHECK(KernelObserver::current() == nullptr);
  Profiler profiler;
  CHECK(KernelObserver::current() == &profiler);
  Tensor y = gelu(linear(x, w, Tensor()));
  y.sum().backward();
  {
    ProfileRange range("optimizer");
    NoGradGuard no_grad;
    w.add_(w.grad(), -0.1);
  }
  profiler.stop();
  CHECK(KernelObserver::current() == nullptr);
  const size_t recorded = profiler.events().size();
  (void)(x + x);  // after stop: not recorded
  CHECK(profiler.events().size() == recorded);

  const std::vector<KernelSummary> rows = profiler.summary();
  const KernelSummary* gemm = find_row(rows, "forward", "matmul");
  REQUIRE(gemm != nullptr);
  CHECK(gemm->calls == 1);
  CHECK(gemm->macs == 16 * 32 * 24);
  CHECK(gemm->gflops > 0);
  // Backward kernels are named after the node that ran them.
  const bool linear_backward = std::any_of(rows.begin(), rows.end(), [](const KernelSummary& r) {
    return r.phase == "backward" && r.name.rfind("LinearBackward > ", 0) == 0;
  });
  CHECK(linear_backward);
  CHECK(find_row(rows, "optimizer", "binary") != nullptr);
  // Rows are sorted by total time; kernel time fits in the wall time.
  double kernel_ms = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    kernel_ms += rows[i].total_ms;
    if (i > 0) CHECK(rows[i - 1].total_ms >= rows[i].total_ms);
  }
  CHECK(kernel_ms <= profiler.wall_ms());
  const std::string table = profiler.table(3);
  CHECK(table.find("matmul") != std::string::npos);
  CHECK(table.find("outside kernels") != std::string::npos);
  CHECK(table.find("more rows") != std::string::npos);
}

TEST_CASE("profilers nest and restore the previous observer", "[profiler]") {
  Profiler outer;
  {
    Profiler inner;
    (void)(ones({4}) * 2.0);
    CHECK(inner.events().size() >= 1);
  }
  CHECK(KernelObserver::current() == &outer);
  const size_t before = outer.events().size();
  (void)(ones({4}) * 2.0);
  CHECK(outer.events().size() > before);
}

TEST_CASE("the Chrome trace has one complete event per kernel call, readable as JSON", "[profiler]") {
  Profiler profiler;
  Tensor w = ones({3, 3}).set_requires_grad(true);
  matmul(w, w).sum().backward();
  profiler.stop();
  const std::string trace = chrome_trace_json(profiler);
  // Read it back with the library's own JSON reader: every "X" event names a recorded kernel.
  json::Reader reader(trace);
  size_t complete = 0, tracks = 0;
  std::string key;
  reader.begin_object();
  while (reader.next_member(key)) {
    if (key != "traceEvents") {
      reader.skip_value();
      continue;
    }
    reader.begin_array();
    while (reader.next_item()) {
      std::string ph, name, field;
      double dur = -1;
      reader.begin_object();
      while (reader.next_member(field)) {
        if (field == "ph") ph = reader.read_string();
        else if (field == "name") name = reader.read_string();
        else if (field == "dur") dur = std::stod(std::string(reader.read_number()));
        else reader.skip_value();
      }
      if (ph == "X") {
        ++complete;
        CHECK(dur >= 0);
        CHECK(!name.empty());
      } else if (ph == "M") {
        ++tracks;
      }
    }
  }
  reader.finish();
  CHECK(complete == profiler.events().size());
  CHECK(tracks == 2);  // forward and backward
}
