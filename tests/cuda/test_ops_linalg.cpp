// matmul and linear on device cuda against the CPU: every matmul runs a GEMM plan, so these tests
// check the row-major to column-major translation end to end (on the emulator, through the
// reference of cuBLASLt's contract; on a GPU, through cuBLASLt).
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

TEST_CASE("matmul of every operand layout on cuda", "[cuda][linalg]") {
  check_on_devices("2-d", {randu({5, 7}), randu({7, 3}, -1, 1, 2)},
                   [](const Inputs& in) { return matmul(in[0], in[1]); });
  check_on_devices("transposed b", {randu({5, 7}), randu({3, 7}, -1, 1, 2)},
                   [](const Inputs& in) { return matmul(in[0], in[1].t()); });
  check_on_devices("transposed a", {randu({7, 5}), randu({7, 3}, -1, 1, 2)},
                   [](const Inputs& in) { return matmul(in[0].t(), in[1]); });
  check_on_devices("batched", {randu({4, 5, 7}), randu({4, 7, 6}, -1, 1, 2)},
                   [](const Inputs& in) { return matmul(in[0], in[1]); });
  check_on_devices("broadcast batch", {randu({2, 1, 5, 7}), randu({3, 7, 6}, -1, 1, 2)},
                   [](const Inputs& in) { return matmul(in[0], in[1]); });
  check_on_devices("attention scores q·kᵀ", {randu({2, 3, 9, 4}), randu({2, 3, 9, 4}, -1, 1, 2)},
                   [](const Inputs& in) { return matmul(in[0], in[1].transpose(-2, -1)); });
  check_on_devices("permuted batch dims", {randu({3, 2, 5, 7}), randu({2, 3, 7, 4}, -1, 1, 2)},
                   [](const Inputs& in) { return matmul(in[0].permute({1, 0, 2, 3}), in[1]); });
  check_on_devices("vector operands", {randu({7}), randu({7, 3}, -1, 1, 2), randu({3})},
                   [](const Inputs& in) { return matmul(matmul(in[0], in[1]), in[2]); });
  check_on_devices("float64", {randu({4, 6}).to(DType::Float64), randu({6, 5}, -1, 1, 2).to(DType::Float64)},
                   [](const Inputs& in) { return matmul(in[0], in[1]); });
}

TEST_CASE("linear with and without bias on cuda", "[cuda][linalg]") {
  const Tensor x = randu({2, 9, 16}), w = randu({12, 16}, -0.5, 0.5, 3), b = randu({12}, -0.5, 0.5, 4);
  check_on_devices("linear", {x, w, b}, [](const Inputs& in) { return linear(in[0], in[1], in[2]); });
  check_on_devices("linear without bias", {x, w}, [](const Inputs& in) { return linear(in[0], in[1]); });
  check_on_devices("linear of a 1-d input", {randu({16}), w, b}, [](const Inputs& in) { return linear(in[0], in[1], in[2]); });
}
