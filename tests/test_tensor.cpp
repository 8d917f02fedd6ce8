// Tensor basics: creation, views without copies, contiguity, dtype conversions, printing, errors.
#include <sstream>
#include <thread>

#include "tessera/core/parallel.h"
#include "tessera/core/philox.h"

#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

TEST_CASE("creation functions fill as documented", "[tensor]") {
  CHECK(zeros({2, 3}).to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(ones({4}, DType::Float64).to_vector<double>() == std::vector<double>(4, 1.0));
  CHECK(full({2}, 2.5).to_vector<float>() == std::vector<float>{2.5f, 2.5f});
  CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(1.0, 2.0, 0.25, DType::Float64).to_vector<double>() == std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(zeros({2, 0}).numel() == 0);
  CHECK(scalar_tensor(3.0).dim() == 0);
  CHECK(scalar_tensor(3.0).item() == 3.0);
}

TEST_CASE("random creation is seedable and has the right moments", "[tensor]") {
  Generator g1(42), g2(42);
  CHECK(randn({100}, DType::Float32, &g1).to_vector<float>() == randn({100}, DType::Float32, &g2).to_vector<float>());
  manual_seed(7);
  Tensor a = randn({1000});
  manual_seed(7);
  CHECK(randn({1000}).to_vector<float>() == a.to_vector<float>());

  Generator g(3);
  Tensor n = randn({20000}, DType::Float64, &g);
  CHECK(mean(n).item() == Approx(0.0).margin(0.03));
  CHECK(var(n).item() == Approx(1.0).epsilon(0.05));
  Tensor u = rand({20000}, DType::Float64, &g);
  CHECK(amax(u).item() < 1.0);
  CHECK(mean(u).item() == Approx(0.5).margin(0.01));
  Tensor t = trunc_normal({20000}, 0.0, 0.02, -0.04, 0.04, DType::Float64, &g);
  CHECK(amax(abs(t)).item() <= 0.04);
  CHECK(std::sqrt(var(t).item()) == Approx(0.02 * 0.8796).epsilon(0.05));  // std of N(0,1) cut at ±2σ
}

TEST_CASE("views share storage and compute strides without copying", "[tensor][views]") {
  Tensor x = arange(24).to(DType::Float64).reshape({2, 3, 4});
  CHECK(x.is_contiguous());
  Tensor p = x.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(!p.is_contiguous());
  CHECK(p.raw_data() == x.raw_data());

  Tensor s = x.select(1, 2);  // x[:, 2, :]
  CHECK(s.shape() == Shape{2, 4});
  CHECK(s.to_vector<double>() == std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23});

  Tensor n = x.narrow(2, 1, 2);  // x[..., 1:3]
  CHECK(n.to_vector<double>() == std::vector<double>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
  Tensor st = x.slice(2, 0, 4, 2);  // x[..., ::2]
  CHECK(st.to_vector<double>() == std::vector<double>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});

  Tensor e = x.select(2, 0).unsqueeze(-1).expand({2, 3, 5});
  CHECK(e.strides()[2] == 0);
  CHECK(e.to_vector<double>()[4] == 0.0);

  Tensor v = x.view({6, 4});
  CHECK(v.raw_data() == x.raw_data());
  CHECK(x.transpose(0, 1).reshape({-1}).to_vector<double>()[1] == 1.0);
  CHECK(x.flatten(1).shape() == Shape{2, 12});
  CHECK(x.unsqueeze(0).squeeze(0).shape() == x.shape());
  CHECK(zeros({1, 3, 1}).squeeze().shape() == Shape{3});
}

TEST_CASE("view refuses incompatible strides, reshape copies instead", "[tensor][views]") {
  Tensor x = zeros({2, 3, 4});
  Tensor t = x.transpose(1, 2);
  CHECK_THROWS_WITH(t.view({2, 12}), Catch::Contains("view") && Catch::Contains("reshape"));
  Tensor r = t.reshape({2, 12});
  CHECK(r.is_contiguous());
  CHECK(r.raw_data() != x.raw_data());
  // A transposed tensor merged only along dims that stay adjacent is still a view.
  CHECK(x.permute({1, 0, 2}).view({3, 2, 4}).raw_data() == x.raw_data());
}

TEST_CASE("contiguous copies in logical order", "[tensor][views]") {
  Tensor x = arange(6).to(DType::Float32).reshape({2, 3});
  Tensor c = x.t().contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(x.contiguous().is_same(x));
}

TEST_CASE("dtype conversions round-trip and round correctly", "[tensor][dtype]") {
  Tensor x = from_vector(std::vector<float>{1.0f, -2.5f, 3.14159f, 65504.f, 1e-6f}, {5});
  Tensor h = x.to(DType::Float16), b = x.to(DType::BFloat16);
  CHECK(h.element_size() == 2);
  std::vector<float> hv = h.to_vector<float>(), bv = b.to_vector<float>();
  CHECK(hv[0] == 1.0f);
  CHECK(hv[1] == -2.5f);
  CHECK(hv[2] == Approx(3.140625f));                         // nearest half
  CHECK(hv[3] == 65504.f);                                   // largest finite half
  CHECK(hv[4] == Approx(1e-6f).epsilon(0.05));               // subnormal half
  CHECK(bv[2] == Approx(3.140625f));                         // bf16 keeps 8 significant bits
  CHECK(Float16(70000.f).bits == 0x7c00);                    // overflow to +inf
  CHECK(static_cast<float>(BFloat16(1.00390625f)) == 1.0f);  // tie rounds to even
  CHECK(x.to(DType::Int64).to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3, 65504, 0});
  CHECK(x.to(DType::Float64).to(DType::Float32).to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("in-place ops bump the version and refuse tensors that require grad", "[tensor]") {
  Tensor x = zeros({3});
  uint64_t v0 = x.version();
  x.fill_(2.0);
  CHECK(x.version() == v0 + 1);
  x.add_(ones({3}), 3.0);
  CHECK(x.to_vector<float>() == std::vector<float>{5, 5, 5});
  x.mul_(0.5);
  CHECK(x.to_vector<float>() == std::vector<float>{2.5, 2.5, 2.5});
  Tensor w = zeros({3}).set_requires_grad();
  CHECK_THROWS_WITH(w.add_(ones({3})), Catch::Contains("add_") && Catch::Contains("requires grad"));
  NoGradGuard no_grad;
  w.add_(ones({3}));
  CHECK(w.to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("printing is readable", "[tensor]") {
  std::ostringstream os;
  os << from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
  CHECK(os.str() == "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], dtype=float64)");
  std::ostringstream big;
  big << arange(100);
  CHECK(big.str() == "tensor([0, 1, 2, ..., 97, 98, 99], dtype=int64)");
  CHECK(describe(zeros({2, 3})) == "float32[2, 3] on cpu");
}

TEST_CASE("view and shape errors name the op and shapes", "[tensor][errors]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(x.view({4, 2}), Catch::Contains("view") && Catch::Contains("[4, 2]"));
  CHECK_THROWS_WITH(x.reshape({-1, -1}), Catch::Contains("reshape"));
  CHECK_THROWS_WITH(x.permute({0, 0}), Catch::Contains("permute"));
  CHECK_THROWS_WITH(x.select(0, 5), Catch::Contains("select") && Catch::Contains("5"));
  CHECK_THROWS_WITH(x.narrow(1, 2, 2), Catch::Contains("narrow"));
  CHECK_THROWS_WITH(x.expand({4, 3}), Catch::Contains("expand"));
  CHECK_THROWS_WITH(x.size(2), Catch::Contains("dim 2"));
  CHECK_THROWS_WITH(x.data<double>(), Catch::Contains("float32"));
  CHECK_THROWS_WITH(x.item(), Catch::Contains("item"));
  CHECK_THROWS_WITH(zeros({-1}), Catch::Contains("negative"));
  // A device that does not exist here, in every build: beyond the device count, or no backend at all.
  CHECK_THROWS_WITH(x.to(Device::cuda(7)), Catch::Contains("cuda:7 is not available"));
  CHECK_THROWS_WITH(parse_device("gpu"), Catch::Contains("gpu"));
}

TEST_CASE("Philox4x32-10 reproduces the published known answers", "[tensor][random]") {
  // Known-answer vectors of the Random123 distribution (kat_vectors, philox4x32_10).
  CHECK(philox4x32({0u, 0u, 0u, 0u}, {0u, 0u}) ==
        std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
        std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
        std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("random fills do not depend on the thread count", "[tensor][random]") {
  const int threads = get_num_threads();
  Generator a(5), b(5);
  set_num_threads(1);
  std::vector<double> one = trunc_normal({50000}, 0.0, 1.0, -2.0, 2.0, DType::Float64, &a).to_vector<double>();
  set_num_threads(2);
  std::vector<double> two = trunc_normal({50000}, 0.0, 1.0, -2.0, 2.0, DType::Float64, &b).to_vector<double>();
  set_num_threads(threads);
  CHECK(one == two);
  CHECK(a.offset() == 50000);
  Generator c(5);
  c.set_offset(49999);
  CHECK(trunc_normal({1}, 0.0, 1.0, -2.0, 2.0, DType::Float64, &c).item() == one.back());
}

TEST_CASE("memory_stats tracks the bytes held by storages and their peak", "[tensor][memory]") {
  reset_peak_memory(DeviceType::CPU);
  const MemoryStats before = memory_stats(DeviceType::CPU);
  CHECK(before.peak_bytes == before.allocated_bytes);
  {
    Tensor a = Tensor::empty({1000}, DType::Float32);
    Tensor b = Tensor::empty({500}, DType::Float64);
    CHECK(memory_stats(DeviceType::CPU).allocated_bytes == before.allocated_bytes + 4000 + 4000);
    Tensor view = a.view({10, 100});  // views share the storage: no new bytes
    CHECK(memory_stats(DeviceType::CPU).allocated_bytes == before.allocated_bytes + 8000);
  }
  const MemoryStats after = memory_stats(DeviceType::CPU);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.peak_bytes == before.allocated_bytes + 8000);
  reset_peak_memory(DeviceType::CPU);
  CHECK(memory_stats(DeviceType::CPU).peak_bytes == before.allocated_bytes);
}

TEST_CASE("ScopedThreadLimit caps parallel_for on its thread only, and nests", "[tensor][parallel]") {
  const int before = get_num_threads();
  {
    ScopedThreadLimit one(1);
    CHECK(get_num_threads() == 1);
    {
      ScopedThreadLimit more(64);  // a cap never raises the global count
      CHECK(get_num_threads() == before);
    }
    CHECK(get_num_threads() == 1);
    int other = 0;
    std::thread([&] { other = get_num_threads(); }).join();
    CHECK(other == before);
  }
  CHECK(get_num_threads() == before);
  CHECK_THROWS_WITH(ScopedThreadLimit(0), Catch::Contains("ScopedThreadLimit"));
}
