// The CUDA device itself: tensors on it, transfers, the caching allocator, device errors, the
// checks kernels report at synchronisation, and that every kernel table has a CUDA kernel.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>

#include "tessera/core/backend.h"
#include "tessera/core/levers.h"
#include "tessera/cuda/device.h"
#include "tessera/ops/kernels/registry.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/upload.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::randu;

TEST_CASE("every kernel table has a CUDA kernel", "[cuda]") {
  for (const KernelTableInfo& k : kernel_tables()) {
    INFO(k.name << " (" << k.family << ")");
    CHECK(k.has(DeviceType::CUDA));
  }
}

TEST_CASE("to(cuda) and back is bit-exact for every dtype, contiguous or not", "[cuda]") {
  Tensor f = randu({5, 6});
  for (const Tensor& host : {f, f.to(DType::Float64), (f * 100.0).to(DType::Int64), gt(f, scalar_like(0.0, f)),
                             f.to(DType::BFloat16), f.to(DType::Float16), f.t(), f.narrow(1, 1, 3)}) {
    INFO(describe(host));
    Tensor d = host.to(Device::cuda());
    CHECK(d.device() == Device::cuda());
    CHECK(d.shape() == host.shape());
    Tensor back = d.to(Device::cpu()).contiguous();
    Tensor want = host.contiguous();
    REQUIRE(back.dtype() == want.dtype());
    CHECK(std::memcmp(back.raw_data(), want.raw_data(), want.numel() * want.element_size()) == 0);
  }
}

TEST_CASE("copies between layouts and dtypes on the device match the CPU", "[cuda]") {
  Tensor x = randu({4, 3, 5});
  for (DType to : {DType::Float32, DType::Float64, DType::Int64, DType::BFloat16, DType::Float16, DType::Bool}) {
    testing::check_on_devices(std::string("to(") + dtype_name(to) + ")", {x * 3.0},
                              [to](const testing::Inputs& in) {
                                return in[0].permute({2, 0, 1}).to(to);
                              },
                              {.backward = to == DType::Float32 || to == DType::Float64});
  }
  testing::check_on_devices("fill_ through a view", {x}, [](const testing::Inputs& in) {
    Tensor y = in[0].detach().clone();
    y.narrow(2, 1, 2).fill_(7.5);
    return y;
  });
}

TEST_CASE("host code cannot read device memory directly", "[cuda]") {
  Tensor d = ones({3}, DType::Float32, Device::cuda());
  CHECK_THROWS_WITH(d.data<float>(), Catch::Contains("float32[3] on cuda:0 lives in device memory") &&
                                         Catch::Contains(".to(Device::cpu())"));
  CHECK(d.select(0, 1).item() == 1.0);  // item() copies to the host first
  CHECK(d.to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("ops refuse operands on different devices, naming both", "[cuda]") {
  Tensor a = ones({3}), b = ones({3}, DType::Float32, Device::cuda());
  CHECK_THROWS_WITH(a + b, Catch::Contains("add") && Catch::Contains("on cpu") && Catch::Contains("on cuda:0"));
  CHECK_THROWS_WITH(matmul(a.view({1, 3}), b.view({3, 1})), Catch::Contains("matmul") && Catch::Contains("cuda:0"));
}

TEST_CASE("an unavailable device index is refused with the reason", "[cuda]") {
  const int n = device_count(DeviceType::CUDA);
  CHECK_THROWS_WITH(
      zeros({2}, DType::Float32, Device::cuda(n)),
      Catch::Contains("cuda:" + std::to_string(n) + " is not available") && Catch::Contains("out of range"));
}

TEST_CASE("the caching allocator serves a repeated step without new device allocations", "[cuda]") {
  const Device dev = Device::cuda();
  auto step = [&] {
    Tensor x = randu({64, 32}).to(dev), w = randu({32, 16}).to(dev);
    return (relu(x) * 2.0).sum().item();
  };
  step();  // warms the cache
  const AllocatorStats before = allocator_stats(dev);
  for (int i = 0; i < 5; ++i) step();
  const AllocatorStats after = allocator_stats(dev);
  CHECK(after.raw_allocations == before.raw_allocations);
  CHECK(after.cache_hits > before.cache_hits);
  CHECK(after.reserved_bytes >= after.allocated_bytes);
  empty_cache(dev);
  CHECK(allocator_stats(dev).reserved_bytes == allocator_stats(dev).allocated_bytes);
}

TEST_CASE("a bad index in a device kernel is reported at the next synchronisation", "[cuda]") {
  Tensor x = randu({5, 3}).to(Device::cuda());
  Tensor index = from_vector(std::vector<int64_t>{0, 7, 2}, {3}).to(Device::cuda());
  Tensor y = index_select(x, 0, index);  // no host read yet: the check is recorded on the device
  CHECK_THROWS_WITH(y.to(Device::cpu()),
                    Catch::Contains("index_select: index 7 at position 1 is out of range for dim 0 of size 5"));
  // The error is reported once; the device keeps working.
  CHECK(index_select(x, 0, from_vector(std::vector<int64_t>{4}, {1}).to(Device::cuda())).to(Device::cpu()).numel() ==
        3);
  synchronize(Device::cuda());
}

TEST_CASE("cross_entropy checks its targets on the device", "[cuda]") {
  Tensor logits = randu({4, 10}).to(Device::cuda());
  Tensor target = from_vector(std::vector<int64_t>{1, 2, 10, 3}, {4}).to(Device::cuda());
  Tensor loss = cross_entropy(logits, target);
  CHECK_THROWS_WITH(loss.item(),
                    Catch::Contains("cross_entropy: target 10 at position 2 is out of range for 10 classes"));
}

TEST_CASE("pinned host tensors are cpu tensors that copy to the device", "[cuda]") {
  Tensor pinned = cuda::empty_pinned({4, 4});
  CHECK(pinned.device() == Device::cpu());
  pinned.fill_(2.5);
  Tensor d = pinned.to(Device::cuda());
  CHECK(d.sum().item() == 40.0);
}

#if defined(TESSERA_CUDA_EMU)
#include "tessera/cuda/emu/cuda_runtime.h"

TEST_CASE("an Upload copies beside the device's work and is ready once the device's stream waits for it", "[cuda]") {
  Tensor host = cuda::empty_pinned({3, 5});
  for (int64_t i = 0; i < 15; ++i) host.data<float>()[i] = static_cast<float>(i) - 4.5f;
  const std::vector<double> expected = host.to_vector<double>();
  for (int round = 0; round < 3; ++round) {  // the destination's memory comes back from the cache
    Upload upload(host, Device::cuda());
    CHECK(upload.pending());
    const Tensor d = upload.ready();
    CHECK_FALSE(upload.pending());
    CHECK(d.device() == Device::cuda());
    CHECK((d * 2.0).to(Device::cpu()).to_vector<double>() == (host * 2.0).to_vector<double>());
    CHECK(d.to(Device::cpu()).to_vector<double>() == expected);
  }
  const Tensor pageable = host * 3.0;  // staged into pinned memory first, the same values arrive
  CHECK(Upload(pageable, Device::cuda()).ready().to(Device::cpu()).to_vector<double>() == pageable.to_vector<double>());
  Upload twice(host, Device::cuda());
  twice.ready();
  CHECK_THROWS_WITH(twice.ready(), Catch::Contains("nothing is being copied"));
  CHECK_THROWS_WITH(Upload().ready(), Catch::Contains("nothing is being copied"));
  CHECK_THROWS_WITH(Upload(host.to(Device::cuda()), Device::cuda()), Catch::Contains("expected a CPU tensor"));
  CHECK(Upload(host, Device::cpu()).ready().data<float>() == host.data<float>());  // on the CPU: itself
}

#if defined(TESSERA_CUDA_EMU)
// The emulator holds a side stream's work back until something waits for it: reading the
// destination before the device's stream waits sees the memory as it was, not the copy.
TEST_CASE("emulator: a copy beside the device's work is not seen without its wait", "[cuda]") {
  Tensor host = cuda::empty_pinned({64});
  host.fill_(3.0);
  Tensor dst = zeros({64}, DType::Float32, Device::cuda());
  const std::shared_ptr<void> copy = cuda::copy_beside(host, dst);
  CHECK(dst.sum().item() == 0.0);  // the device's stream did not wait: the copy has not run
  cuda::wait_beside(copy);
  CHECK(dst.sum().item() == 192.0);
}
#endif

TEST_CASE("running out of device memory says how much was asked, free and reserved", "[cuda]") {
  const Device dev = Device::cuda();
  empty_cache(dev);
  cuda::emu::set_device_memory_capacity(64 << 20);
  struct Restore {
    ~Restore() { cuda::emu::set_device_memory_capacity(0); }
  } restore;
  Tensor keep = zeros({8 << 20}, DType::Float32, dev);  // 32 MiB held
  CHECK_THROWS_WITH(zeros({16 << 20}, DType::Float32, dev),
                    Catch::Contains("cuda:0 out of memory: tried to allocate 64.00 MiB") &&
                        Catch::Contains("free of 64.00 MiB") && Catch::Contains("reserved by Tessera"));
}
#endif

TEST_CASE("gradient sinks on the device: a layer norm and a slice add into the residual's gradient as on the CPU",
          "[cuda][autograd]") {
  // Each residual's dense part is made last, so it waits in the engine's buffer when the layer norm
  // and the slice run (tests/test_autograd.cpp counts that they take it).
  ScopedLever on(&Levers::gradient_sinks, true);
  const auto residuals = [](const testing::Inputs& in) {
    const Tensor a = in[0] * 2.0;
    const Tensor normed = layer_norm(a, in[1], in[2], 1e-5) * 3.0;
    const Tensor r = a * 1.5 + normed;
    const Tensor later = r.narrow(1, 3, 17) * 4.0;
    return r.narrow(1, 0, 17) * 0.5 + later;
  };
  // Layer norm's float32 sums run in another order on the device.
  testing::check_on_devices("gradient sinks", {randn({5, 40}), randn({40}), randn({40})}, residuals,
                            {.rtol = 1e-4, .atol = 1e-5});
}
