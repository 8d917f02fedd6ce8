// What the op table (tests/cuda/test_op_samples.cpp) cannot state as an op of its inputs: random
// draws addressed by a generator's state give a device the CPU's numbers, indices out of range
// are skipped by the device kernels and reported at the next synchronisation, an expression's
// constants are filled once, a linear layer's bias gradient costs no launch of its own, and a
// depthwise convolution of a token map takes the path its levers choose, without copies where that
// path needs none.
#include <catch2/catch.hpp>

#include "tessera/core/dispatch.h"
#include "tessera/core/levers.h"
#include "tessera/ops/kernels/conv.h"
#include "tessera/ops/ops.h"
#include "tests/device_check.h"
#include "tests/kernel_calls.h"
#include "tests/op_samples/op_info.h"

using namespace tessera;
using testing::ints;
using testing::randu;

TEST_CASE("random draws on cuda equal the CPU's for the same generator state", "[cuda][random]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Generator g_cpu(99), g_dev(99);
    CHECK(rand({1000}, dtype, &g_cpu).to_vector<double>() ==
          rand({1000}, dtype, &g_dev, Device::cuda()).to_vector<double>());
    CHECK(g_cpu.offset() == g_dev.offset());
    // Normals and truncated normals go through log/cos/sqrt/erfinv, which may differ in the last bit.
    testing::DeviceCheckOptions opt;
    opt.rtol = 1e-12;
    opt.atol = 1e-12;
    CHECK(testing::compare_values(randn({1000}, dtype, &g_dev, Device::cuda()), randn({1000}, dtype, &g_cpu), opt) ==
          "");
    CHECK(testing::compare_values(trunc_normal({1000}, 0.0, 0.02, -2, 2, dtype, &g_dev, Device::cuda()),
                                  trunc_normal({1000}, 0.0, 0.02, -2, 2, dtype, &g_cpu), opt) == "");
  }
}

TEST_CASE("an expression's constant is filled on the device once, and kept apart per value and dtype",
          "[cuda][creation]") {
  const Tensor x = ones({8}, DType::Float32, Device::cuda());
  (void)(x * 0.375);
  const int64_t before = device_launches();
  const Tensor y = x * 0.375;
  CHECK(device_launches() - before == 1);  // the product; its constant was filled before
  CHECK(y.to_vector<double>() == std::vector<double>(8, 0.375));
  CHECK((x * 0.25).to_vector<double>() == std::vector<double>(8, 0.25));
  const Tensor x64 = ones({2}, DType::Float64, Device::cuda());
  CHECK((x64 * 0.375).dtype() == DType::Float64);
  CHECK(constant_scalar(0.375, x64).dtype() == DType::Float64);
  CHECK(constant_scalar(0.375, x).to_vector<double>() == std::vector<double>{0.375});
}

TEST_CASE("indices out of range are skipped by the kernels and reported at synchronisation", "[cuda][indexing]") {
  const Device dev = Device::cuda();
  const Tensor x_host = from_vector(std::vector<double>{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3});
  Tensor x = x_host.to(dev).set_requires_grad(true);
  Tensor y = index_select(x, 0, ints({1, 9, 3, -2}).to(dev));
  y.backward(ones({4, 3}, DType::Float64, dev));
  CHECK_THROWS_WITH(synchronize(dev), Catch::Contains("index_select: index") && Catch::Contains("out of range"));
  // The valid rows were gathered, and only they received gradient.
  const std::vector<double> got = y.to(Device::cpu()).to_vector<double>();
  CHECK(std::vector<double>(got.begin(), got.begin() + 3) == std::vector<double>{10, 11, 12});
  CHECK(std::vector<double>(got.begin() + 6, got.begin() + 9) == std::vector<double>{30, 31, 32});
  CHECK(x.grad().to(Device::cpu()).to_vector<double>() == std::vector<double>{0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1});

  Tensor g = gather(x.detach(), 1, from_vector(std::vector<int64_t>{2, 5, 0, -1, 1, 1, 0, 3}, {4, 2}).to(dev));
  CHECK_THROWS_WITH(synchronize(dev), Catch::Contains("gather: index") && Catch::Contains("out of range"));
  const std::vector<double> gv = g.to(Device::cpu()).to_vector<double>();
  CHECK(gv[0] == 2);
  CHECK(gv[2] == 10);
  CHECK(gv[4] == 21);
  CHECK(gv[5] == 21);
  CHECK(gv[6] == 30);
}

TEST_CASE("a linear layer's bias gradient is summed by its weight gradient's GEMM, with no launch of its own",
          "[cuda][linalg][levers]") {
  const Device cuda = Device::cuda();
  const Tensor x = randu({6, 5}).to(cuda).set_requires_grad();
  const Tensor w = randu({4, 5}, -1, 1, 2).to(cuda).set_requires_grad();
  const Tensor b = randu({4}, -1, 1, 3).to(cuda).set_requires_grad();
  const Tensor g = randu({6, 4}, -1, 1, 4).to(cuda);
  // The backward's launches and its bias gradient, with the epilogue (TESSERA_BIAS_GRAD_EPILOGUE)
  // on or off.
  const auto backward = [&](bool epilogue) {
    ScopedLever lever(&Levers::bias_grad_epilogue, epilogue);
    const Tensor y = linear(x, w, b);
    const LaunchCounts before = device_launch_counts();
    y.backward(g);
    const LaunchCounts used = device_launch_counts() - before;
    const Tensor gb = b.grad().clone();
    for (const Tensor& t : {x, w, b}) t.set_grad(Tensor());
    return std::pair{used, gb};
  };
  const auto [on, gb_on] = backward(true);
  const auto [off, gb_off] = backward(false);
  CHECK(on.library_calls == 2);  // dx, and dW with db in its epilogue
  CHECK(off.library_calls == 2);
  CHECK(on.kernels < off.kernels);  // off: the reduction over g as well
  CHECK(testing::compare_values(gb_on, gb_off, {}) == "");
  CHECK(testing::compare_values(gb_on, sum(g, {0}), {}) == "");
}

// Where a depthwise convolution of a token map (XCiT's LPI, CoaT's position encodings: channels
// innermost) runs, forward and backward, and what it copies: under TESSERA_DEPTHWISE_CUDNN_NHWC
// cuDNN's NHWC path reads and writes it as it lies, one library call per direction; our own kernels
// (the default) make no library call; NCHW cuDNN (TESSERA_DEPTHWISE_ANY_LAYOUT=0) copies.
TEST_CASE("a depthwise convolution of a token map reaches cuDNN's NHWC path without a copy", "[cuda][conv]") {
  const Device dev = Device::cuda();
  Generator gen(7);
  const Tensor tokens = randn({2, 30, 6}, DType::Float32, &gen).to(dev).set_requires_grad(true);
  const Tensor w = randn({6, 1, 3, 3}, DType::Float32, &gen).to(dev).set_requires_grad(true);
  const Tensor b = randn({6}, DType::Float32, &gen).to(dev).set_requires_grad(true);
  const Tensor g = randn({2, 30, 6}, DType::Float32, &gen).to(dev);
  struct Counted {
    int copies;
    int64_t library_calls;
    bool channels_last;  // the output
  };
  const auto step = [&] {
    testing::KernelCalls calls;
    const LaunchCounts before = device_launch_counts();
    const Tensor y = conv2d(tokens.transpose(1, 2).reshape({2, 6, 5, 6}), w, b, {1, 1}, {1, 1}, {1, 1}, 6);
    y.flatten(2).transpose(1, 2).backward(g);
    return Counted{calls.calls["copy"], (device_launch_counts() - before).library_calls, is_channels_last(y)};
  };
  {
    ScopedLever nhwc(&Levers::depthwise_cudnn_nhwc, true);
    const Counted c = step();
    CHECK(c.copies == 0);
    CHECK(c.library_calls == 3);  // forward, input gradient, filter gradient
    CHECK(c.channels_last);
  }
  const Counted own = step();
  CHECK(own.copies == 0);
  CHECK(own.library_calls == 0);
  CHECK(own.channels_last);
  ScopedLever nchw(&Levers::depthwise_any_layout, false);
  const Counted copied = step();
  CHECK(copied.copies > 0);
  CHECK(copied.library_calls == 3);
}
