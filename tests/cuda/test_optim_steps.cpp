// The optimizer steps on device cuda beyond what the op table's samples compare with the CPU
// (tests/op_samples/optim.cpp: Adam(W), SGD, sum_of_squares, scale_, lerp_, unscale_): the AdamW step
// with clipping and the EMA fused into its launch equals the CPU's and is bit for bit the separate
// ops on its device; sum_of_squares stays on the device and is reproducible; lerp_ is exactly self
// at weight 0 and exactly end at 1 (torch's choice of formula); train::clip_grad_norm.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "tessera/ops/ops.h"
#include "tessera/ops/optim.h"
#include "tessera/train/optimizer.h"
#include "tests/device_check.h"
#include "tests/op_samples/op_info.h"

using namespace tessera;
using testing::check_update_on_devices;
using testing::Inputs;

namespace {

// The lists of the op table's optimizer samples (tests/op_samples/optim.cpp).
std::vector<Tensor> list(uint64_t seed, DType dtype = DType::Float32) { return testing::optim_list(seed, dtype); }
// The length of a list. A function, not a namespace-scope constant: the lists' shapes live in
// another translation unit, which need not be initialised before this one.
size_t list_length() {
  static const size_t n = list(0).size();
  return n;
}

// The concatenation of lists, for check_update_on_devices.
Inputs join(const std::vector<std::vector<Tensor>>& lists) {
  Inputs out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

// Sub-list k (of length list_length()) of the joined tensors.
std::vector<Tensor> part(const Inputs& all, size_t k) {
  const size_t n = list_length();
  REQUIRE(all.size() >= (k + 1) * n);
  REQUIRE(n > 0);
  return std::vector<Tensor>(all.begin() + static_cast<std::ptrdiff_t>(k * n),
                             all.begin() + static_cast<std::ptrdiff_t>((k + 1) * n));
}

std::vector<Tensor> squared(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t * t);
  return out;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.clone());
  return out;
}

// Every tensor of got has the bits of the one in want (both on one device).
void check_same_bits(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what << "[" << i << "] on " << got[i].device().str());
    const Tensor a = got[i].to(Device::cpu()).contiguous(), b = want[i].to(Device::cpu()).contiguous();
    REQUIRE(a.shape() == b.shape());
    CHECK(std::memcmp(a.raw_data(), b.raw_data(), a.numel() * a.element_size()) == 0);
  }
}

}  // namespace

TEST_CASE("adamw_update_ with clipping and the EMA in its launch on cuda", "[cuda][optim]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // params, grads, exp_avgs, exp_avg_sqs, emas.
    const Inputs tensors =
        join({list(1, dtype), list(2, dtype), list(3, dtype), squared(list(4, dtype)), list(14, dtype)});
    for (bool decoupled : {true, false})
      for (double max_norm : {0.5, 1e6})  // clipped, and under the limit (factor exactly 1)
        for (double ema_weight : {0.3, 0.8}) {
          INFO(dtype_name(dtype) << (decoupled ? " AdamW" : " Adam with L2") << ", max_norm " << max_norm
                                 << ", EMA weight " << ema_weight);
          const AdamConfig config{2e-3, 0.85, 0.995, 1e-6, 0.05, decoupled};
          check_update_on_devices("fused adam", tensors, [&](Inputs& t) {
            const std::vector<Tensor> params = part(t, 0), grads = part(t, 1), emas = part(t, 4);
            std::vector<Tensor> m = part(t, 2), v = part(t, 3);
            // The clipping factor, computed on the tensors' device from their sum of squares.
            std::vector<Tensor> leaves;
            for (const Tensor& g : grads) {
              Tensor leaf = zeros_like(g).set_requires_grad(true);
              leaf.set_grad(g);
              leaves.push_back(leaf);
            }
            const Tensor factor = train::clip_grad_scale(leaves, max_norm);
            CHECK(factor.device() == t[0].device());
            for (int64_t step = 4; step <= 5; ++step) {
              // The separate ops on copies, then the fused launch: the same bits on this device.
              std::vector<Tensor> rp = clones(params), rg = clones(grads), rm = clones(m), rv = clones(v),
                                  re = clones(emas);
              scale_(rg, factor);
              adamw_update_(rp, rg, rm, rv, config, step);
              lerp_(re, rp, ema_weight);
              adamw_update_(params, grads, m, v, config, step, AdamFusion{factor, emas, ema_weight, Tensor()});
              check_same_bits(params, rp, "params");
              check_same_bits(m, rm, "exp_avgs");
              check_same_bits(v, rv, "exp_avg_sqs");
              check_same_bits(emas, re, "emas");
            }
          });
        }
  }
}

TEST_CASE("sum_of_squares on cuda equals the CPU's, stays on the device, and is reproducible", "[cuda][optim]") {
  for (const Device& device : testing::test_devices()) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO(dtype_name(dtype) << " on " << device.str());
      const std::vector<Tensor> host = list(7, dtype);
      std::vector<Tensor> dev;
      for (const Tensor& t : host) dev.push_back(t.to(device));
      const Tensor got = sum_of_squares(dev);
      CHECK(got.device() == device);
      CHECK(got.dtype() == DType::Float64);
      CHECK(got.dim() == 0);
      const double want = sum_of_squares(host).item();
      CHECK(got.item() == Approx(want).epsilon(1e-13));
      CHECK(sum_of_squares(dev).item() == got.item());  // bitwise: fixed chunks and reduction order
      // Gradients given as views are made contiguous first.
      CHECK(sum_of_squares({dev[1].t()}).item() == Approx(sum_of_squares({host[1]}).item()).epsilon(1e-13));
    }
    // Only empty tensors: zero, still written by the device.
    const Tensor none = sum_of_squares({zeros({0}, DType::Float32, device), zeros({3, 0}, DType::Float32, device)});
    CHECK(none.device() == device);
    CHECK(none.item() == 0.0);
    CHECK(sum_of_squares({full({1}, -3.0, DType::Float32, device)}).item() == 9.0);
  }
}

TEST_CASE("lerp_ is exactly self at weight 0 and exactly end at 1 on cuda", "[cuda][optim]") {
  // torch.lerp's choice of formula by weight: exactly self at weight 0 and exactly end at 1
  // (self + 1·(end − self) is not end in general).
  for (const Device& device : testing::test_devices())
    for (double weight : {0.0, 1.0}) {
      const std::vector<Tensor> self_host = list(10), end_host = list(11);
      std::vector<Tensor> self, end;
      for (size_t i = 0; i < list_length(); ++i) {
        self.push_back(self_host[i].to(device));
        end.push_back(end_host[i].to(device));
      }
      lerp_(self, end, weight);
      for (size_t i = 0; i < list_length(); ++i)
        CHECK(self[i].to_vector<float>() == (weight == 0.0 ? self_host : end_host)[i].to_vector<float>());
    }
}

TEST_CASE("train::clip_grad_norm on device tensors equals the CPU's", "[cuda][optim]") {
  for (double max_norm : {0.5, 1e6}) {  // clipped, and left as is
    INFO("max_norm " << max_norm);
    check_update_on_devices("clip_grad_norm", join({list(13), list(12)}), [max_norm](Inputs& t) {
      std::vector<Tensor> params;
      for (size_t i = 0; i < list_length(); ++i) {
        Tensor p = t[i].detach().set_requires_grad(true);
        if (i != 1) p.set_grad(t[list_length() + i]);  // parameter 1 has no gradient: ignored
        params.push_back(p);
      }
      Tensor view_grad = zeros({3, 2}, DType::Float32, t[0].device()).set_requires_grad(true);
      view_grad.set_grad(t[list_length() + 1].narrow(0, 0, 3).narrow(1, 0, 2));  // a view: made contiguous
      params.push_back(view_grad);
      const Tensor norm = train::clip_grad_norm(params, max_norm);
      CHECK(norm.device() == t[0].device());
      t.push_back(view_grad.grad());
      t.push_back(norm);
    });
  }
}
