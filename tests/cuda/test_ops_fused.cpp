// The fused ops (ops/fused.h) on device cuda against the CPU (tests/device_check.h): rows across
// several of the backward's fixed chunks of rows (cuda/column_sums.h), a per-sample scale, erf and
// tanh GELU, float64, strided inputs.
#include <catch2/catch.hpp>

#include "tessera/ops/ops.h"
#include "tests/device_check.h"

using namespace tessera;
using testing::check_on_devices;
using testing::Inputs;
using testing::randu;

TEST_CASE("layer_scale_residual and its gradients on cuda", "[cuda][fused]") {
  for (const Shape& shape : std::vector<Shape>{{3, 7}, {2, 5, 37}, {4, 70, 24}, {1, 1, 300}}) {
    const int64_t C = shape.back(), B = shape[0];
    const Tensor x = randu(shape, -2, 2), f = randu(shape, -1, 1, 3), gamma = randu({C}, -0.5, 0.5, 4);
    INFO("shape " << detail::concat(shape));
    check_on_devices("layer_scale_residual", {x, f, gamma},
                     [](const Inputs& in) { return layer_scale_residual(in[0], in[1], in[2]); });
    // Stochastic depth's per-sample scale: a constant, so it must not require grad.
    const Tensor s = randu({B}, 0, 2, 5);
    check_on_devices("layer_scale_residual with a sample scale", {x, f, gamma, s},
                     [](const Inputs& in) { return layer_scale_residual(in[0], in[1], in[2], in[3]); },
                     {.no_grad = {3}});
  }
  const Tensor x = randu({3, 9, 16}).to(DType::Float64);
  check_on_devices("float64", {x, randu({3, 9, 16}, -1, 1, 2).to(DType::Float64), randu({16}, -1, 1, 3).to(DType::Float64)},
                   [](const Inputs& in) { return layer_scale_residual(in[0], in[1], in[2]); });
}

TEST_CASE("linear_gelu and its gradients on cuda", "[cuda][fused]") {
  for (const Shape& shape : std::vector<Shape>{{3, 8}, {2, 70, 16}, {130, 5}}) {
    const int64_t in = shape.back();
    for (int64_t out : {int64_t{12}, int64_t{33}}) {
      const Tensor x = randu(shape, -2, 2), w = randu({out, in}, -0.5, 0.5, 3), b = randu({out}, -0.5, 0.5, 4);
      INFO("shape " << detail::concat(shape) << " out " << out);
      // The weight and bias gradients sum 140 rows of terms of both signs: the last-bit differences
      // of the two devices' erf/tanh (each within 1e-7 relative) add up to about 1e-5 of the result.
      for (bool approximate : {false, true})
        check_on_devices(approximate ? "linear_gelu tanh" : "linear_gelu erf", {x, w, b},
                         [approximate](const Inputs& v) { return linear_gelu(v[0], v[1], v[2], approximate); },
                         {.atol = 1e-5});
    }
  }
  check_on_devices("float64", {randu({4, 6}).to(DType::Float64), randu({5, 6}, -1, 1, 2).to(DType::Float64),
                               randu({5}, -1, 1, 3).to(DType::Float64)},
                   [](const Inputs& v) { return linear_gelu(v[0], v[1], v[2]); });
}

TEST_CASE("xca_attention_map and its gradients on cuda", "[cuda][fused]") {
  for (const Shape& shape : std::vector<Shape>{{1, 1, 4, 6}, {2, 3, 8, 17}, {1, 2, 48, 20}}) {
    const int64_t h = shape[1];
    const Tensor q = randu(shape, -2, 2), k = randu(shape, -1, 1, 3), t = randu({h, 1, 1}, 0.5, 2, 4);
    INFO("shape " << detail::concat(shape));
    check_on_devices("xca_attention_map", {q, k, t},
                     [](const Inputs& in) { return xca_attention_map(in[0], in[1], in[2]); });
  }
  // A channel of q that is zero over every token (its norm clamped to eps).
  Tensor q = randu({1, 2, 4, 5});
  q.narrow(2, 2, 1).zero_();
  check_on_devices("a zero row", {q, randu({1, 2, 4, 5}, -1, 1, 3), randu({2, 1, 1}, 0.5, 2, 4)},
                   [](const Inputs& in) { return xca_attention_map(in[0], in[1], in[2]); });
  check_on_devices("float64", {randu({2, 2, 5, 7}).to(DType::Float64), randu({2, 2, 5, 7}, -1, 1, 2).to(DType::Float64),
                               randu({2, 1, 1}, 0.5, 2, 3).to(DType::Float64)},
                   [](const Inputs& in) { return xca_attention_map(in[0], in[1], in[2]); });
}

TEST_CASE("factor_attention_merge and its gradients on cuda", "[cuda][fused]") {
  for (const Shape& shape : std::vector<Shape>{{1, 1, 1, 3}, {2, 3, 10, 4}, {1, 8, 50, 8}}) {
    const Shape image{shape[0], shape[1], shape[2] - 1, shape[3]};
    INFO("shape " << detail::concat(shape));
    check_on_devices("factor_attention_merge", {randu(shape, -2, 2), randu(shape, -1, 1, 3), randu(image, -1, 1, 4)},
                     [](const Inputs& in) { return factor_attention_merge(in[0], in[1], in[2], 0.25); });
  }
  check_on_devices("float64", {randu({2, 2, 5, 3}).to(DType::Float64), randu({2, 2, 5, 3}, -1, 1, 2).to(DType::Float64),
                               randu({2, 2, 4, 3}, -1, 1, 3).to(DType::Float64)},
                   [](const Inputs& in) { return factor_attention_merge(in[0], in[1], in[2], -0.5); });
}

TEST_CASE("class_attention and its gradients on cuda", "[cuda][fused]") {
  // Token counts below, at and above the block's 256 threads.
  for (const Shape& shape : std::vector<Shape>{{1, 1, 1, 3}, {2, 3, 10, 4}, {1, 2, 300, 8}}) {
    const Shape query{shape[0], shape[1], 1, shape[3]};
    INFO("shape " << detail::concat(shape));
    check_on_devices("class_attention", {randu(query, -2, 2), randu(shape, -1, 1, 3), randu(shape, -1, 1, 4)},
                     [](const Inputs& in) { return class_attention(in[0], in[1], in[2], 0.5); });
  }
  check_on_devices("float64", {randu({2, 2, 1, 3}).to(DType::Float64), randu({2, 2, 5, 3}, -1, 1, 2).to(DType::Float64),
                               randu({2, 2, 5, 3}, -1, 1, 3).to(DType::Float64)},
                   [](const Inputs& in) { return class_attention(in[0], in[1], in[2], -0.7); });
}

TEST_CASE("xnorm_matmul and its gradients on cuda", "[cuda][fused]") {
  for (const Shape& shape : std::vector<Shape>{{1, 1, 1, 3}, {2, 3, 10, 4}, {1, 4, 70, 8}}) {
    const Shape ctx{shape[0], shape[1], shape[3], 5};
    INFO("shape " << detail::concat(shape));
    check_on_devices("xnorm_matmul", {randu(shape, -2, 2), randu(ctx, -1, 1, 3), randu({shape[1], 1, 1}, 0.5, 2, 4)},
                     [](const Inputs& in) { return xnorm_matmul(in[0], in[1], in[2]); });
  }
  // A query that is zero (its norm clamped to eps).
  Tensor q = randu({1, 2, 4, 3});
  q.narrow(2, 1, 1).zero_();
  check_on_devices("a zero query", {q, randu({1, 2, 3, 3}, -1, 1, 3), randu({2, 1, 1}, 0.5, 2, 4)},
                   [](const Inputs& in) { return xnorm_matmul(in[0], in[1], in[2]); });
  check_on_devices("float64", {randu({2, 2, 5, 3}).to(DType::Float64), randu({2, 2, 3, 4}, -1, 1, 2).to(DType::Float64),
                               randu({2, 1, 1}, 0.5, 2, 3).to(DType::Float64)},
                   [](const Inputs& in) { return xnorm_matmul(in[0], in[1], in[2]); });
}
