// Samples of the indexing ops: gather and index_select (the gather and scatter-add kernels) with
// repeated, transposed, broadcast (stride-0) and strided indices along every dim, a stride-0 input,
// rows longer than a block, int64/bool values, an empty index; cat, stack, split, chunk and narrow,
// which run on the copy kernel; pad and embed, which run on the embed kernel; cast_all.
#include <cmath>

#include "tests/op_samples/op_info.h"

namespace tessera::testing {

Tensor random_index(const Shape& shape, int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> v(numel_of(shape));
  for (int64_t& i : v) i = static_cast<int64_t>(gen.uniform() * static_cast<double>(n));
  return from_vector(v, shape);
}

Tensor ints(const std::vector<int64_t>& values) { return from_vector(values, {static_cast<int64_t>(values.size())}); }

std::vector<OpInfo> indexing_ops() {
  return {
      {OpId::gather,
       [] {
         const Tensor x = randu({4, 5, 6}), y = randu({6, 5}), v = randu({5, 7});
         const auto along = [](int64_t dim) { return [dim](const Inputs& in) { return gather(in[0], dim, in[1]); }; };
         return std::vector<SampleInput>{
             // The index is larger than x along the gathered dim (repeats) and smaller in another
             // dim, so the scatter-add also leaves part of the gradient untouched.
             {"dim 0", {x, random_index({7, 3, 6}, 4, 1)}, along(0)},
             {"dim 1", {x, random_index({4, 9, 2}, 5, 2)}, along(1)},
             {"dim -1", {x, random_index({2, 5, 11}, 6, 3)}, along(-1)},
             {"float64", {x.to(DType::Float64), random_index({4, 5, 3}, 5, 4)}, along(1)},
             // Neither operand walks its memory in order.
             {"transposed input and index",
              {y, random_index({3, 8}, 5, 5)},
              [](const Inputs& in) { return gather(in[0].t(), 0, in[1].t()); }},
             // Every row gathers the same columns; the gradient adds all rows' contributions.
             {"stride-0 index",
              {y, random_index({1, 7}, 5, 6)},
              [](const Inputs& in) {
                return gather(in[0], 1, in[1].expand({6, 7}));
              }},
             // Grid-stride loops: rows longer than a block, a dim not a multiple of 32.
             {"long rows", {randu({3, 301}), random_index({3, 517}, 301, 8)}, along(1), {}, false},
             // Every index reads the same element; the gradient of the expand is a sum.
             {"stride-0 input",
              {randu({6, 1}), random_index({6, 4}, 3, 7)},
              [](const Inputs& in) {
                return gather(in[0].expand({6, 3}), 1, in[1]);
              }},
             {"int64 values", {(v * 1000.0).to(DType::Int64), random_index({5, 9}, 7, 9)}, along(1)},
             {"bool values", {gt(v, scalar_like(0.0, v)), random_index({5, 9}, 7, 9)}, along(1)},
             {"6 picks among 4 columns", {randu({3, 4}), random_index({2, 6}, 4, 5)}, along(1)},
             {"dim 0 of [3,4]", {randu({3, 4}), random_index({5, 3}, 3, 6)}, along(0)},
             {"a transposed input",
              {randu({3, 4}), random_index({4, 5}, 3, 7)},
              [](const Inputs& in) { return gather(in[0].t(), 1, in[1]); }},
             {"a transposed index",
              {randu({3, 4}), random_index({2, 6}, 4, 5)},
              [](const Inputs& in) { return gather(in[0], -1, in[1].t().contiguous().t()); }},
         };
       }},
      {OpId::index_select,
       [] {
         const Tensor x = randu({3, 4, 5});
         const Tensor rep = ints({2, 0, 2, 2, 1});
         const auto along = [](int64_t dim) {
           return [dim](const Inputs& in) { return index_select(in[0], dim, in[1]); };
         };
         return std::vector<SampleInput>{
             {"dim 0, repeated", {x, rep}, along(0)},
             {"dim 1", {x, ints({3, 3, 0})}, along(1)},
             {"dim 2", {x, ints({4, 1, 4, 0, 1, 4})}, along(2)},
             {"permuted input",
              {x, rep},
              [](const Inputs& in) {
                return index_select(in[0].permute({2, 0, 1}), 1, in[1]);
              }},
             // An embedding-like lookup: many repeated rows longer than a block.
             {"embedding", {randu({11, 300}), random_index({40}, 11, 10)}, along(0), {}, false},
             {"float64", {x.to(DType::Float64), rep}, along(0)},
             {"empty index", {x, ints({})}, along(1)},
             {"int64 values", {(randu({5, 7}) * 1000.0).to(DType::Int64), ints({4, 0, 4, 2})}, along(0)},
         };
       }},
      {OpId::cat,
       [] {
         const Tensor a = randu({3, 4}), b = randu({3, 2}, -1, 1, 8), c = randu({3, 4}, -1, 1, 9);
         return std::vector<SampleInput>{
             {"dim 1",
              {a, b, c},
              [](const Inputs& in) {
                return cat({in[0], in[1], in[2]}, 1);
              }},
             {"dim 0",
              {a, c},
              [](const Inputs& in) {
                return cat({in[0], in[1].t().t()}, 0);
              }},
             {"transposed",
              {a, c},
              [](const Inputs& in) {
                return cat({in[0].t(), in[1].t()}, 1);
              }},
             {"int64",
              {(a * 10.0).to(DType::Int64), (c * 10.0).to(DType::Int64)},
              [](const Inputs& in) {
                return cat({in[0], in[1]}, 0);
              }},
             {"an empty piece",
              {a, randu({0, 4})},
              [](const Inputs& in) {
                return cat({in[0], in[1]}, 0);
              }},
             {"a constant piece and a transposed one",
              {randu({2, 3}, -1, 1, 1), randu({2, 1}, -1, 1, 2), randu({2, 2}, -1, 1, 4), randu({3, 2}, -1, 1, 3)},
              [](const Inputs& in) {
                return cat({in[0], in[1], in[2], in[3].t()}, 1);
              },
              {.no_grad = {2}}},
             {"dim -2 of a transposed piece",
              {randu({2, 3}, -1, 1, 1), randu({3, 2}, -1, 1, 3)},
              [](const Inputs& in) {
                return cat({in[0].t(), in[1]}, -2);
              }},
             // The same tensor twice accumulates both slices.
             {"one tensor twice",
              {randu({2, 3}, -1, 1, 1)},
              [](const Inputs& in) {
                return cat({in[0], in[0] * 2.0}, 0);
              }},
         };
       }},
      {OpId::stack,
       [] {
         return std::vector<SampleInput>{
             {"dim 1",
              {randu({3, 4}), randu({3, 4}, -1, 1, 9)},
              [](const Inputs& in) {
                return stack({in[0], in[1]}, 1);
              }},
             {"a transposed piece, one tensor twice",
              {randu({2, 3}, -1, 1, 1), randu({3, 2}, -1, 1, 2)},
              [](const Inputs& in) {
                return stack({in[0], in[1].t(), in[0]}, 1);
              }},
         };
       }},
      {OpId::unbind,
       [] {
         return std::vector<SampleInput>{
             // q, k and v of a qkv projection [B, N, 3·h·dh], as the attention layers take them.
             {"q, k, v of a permuted projection",
              {randu({2, 5, 3 * 2 * 4})},
              [](const Inputs& in) {
                const std::vector<Tensor> qkv = unbind(in[0].reshape({2, 5, 3, 2, 4}).permute({2, 0, 3, 1, 4}), 0);
                return matmul(qkv[0], qkv[1].transpose(-2, -1)) + matmul(qkv[2], qkv[2].transpose(-2, -1)) * 0.5;
              }},
             {"a piece without a gradient",
              {randu({3, 4, 2})},
              [](const Inputs& in) {
                const std::vector<Tensor> p = unbind(in[0], 1);
                return p[0] * p[3] + p[3] * 2.0;
              }},
             {"the last dim, float64",
              {randu({4, 3}).to(DType::Float64)},
              [](const Inputs& in) {
                const std::vector<Tensor> p = unbind(in[0], -1);
                return p[2] - p[0];
              }},
         };
       }},
      {OpId::split,
       [] {
         return std::vector<SampleInput>{
             {"into 3 and 1",
              {randu({3, 4})},
              [](const Inputs& in) {
                std::vector<Tensor> pieces = split(in[0], 3, 1);
                return pieces[0] * 2.0 + pad(pieces[1], {0, 2});
              }},
             {"into 2, 2, 1",
              {randu({5, 4})},
              [](const Inputs& in) {
                std::vector<Tensor> p = split(in[0], 2, 0);
                return cat({p[2] * 3.0, p[0], p[1] * p[1]}, 0);
              }},
         };
       }},
      {OpId::chunk,
       [] {
         return std::vector<SampleInput>{
             {"3 along dim 0",
              {randu({5, 6})},
              [](const Inputs& in) {
                std::vector<Tensor> pieces = chunk(in[0], 3, 0);
                return cat({pieces[2], pieces[0]}, 0);
              }},
             {"of a transposed view",
              {randu({5, 4})},
              [](const Inputs& in) {
                std::vector<Tensor> p = chunk(in[0].t(), 3, 1);  // 2, 2, 1 along the input's dim 0
                return p[0] * p[1] + p[1];
              }},
         };
       }},
      {OpId::split_with_sizes,
       [] {
         return std::vector<SampleInput>{
             {"with an empty piece",
              {randu({4, 9})},
              [](const Inputs& in) {
                std::vector<Tensor> pieces = split_with_sizes(in[0], {2, 0, 4, 3}, 1);
                return cat({pieces[3], sum(pieces[1], {1}, true), pieces[0] * 2.0}, 1) + pieces[2].narrow(1, 0, 1);
              }},
             {"along dim -1",
              {randu({5, 4})},
              [](const Inputs& in) {
                return split_with_sizes(in[0], {1, 3}, -1)[1] * 2.0;
              }},
         };
       }},
      {OpId::pad,
       [] {
         return std::vector<SampleInput>{
             {"with a value",
              {randu({2, 3, 4})},
              [](const Inputs& in) {
                return pad(in[0], {1, 2, 0, 3}, -0.5);
              }},
             {"crops",
              {randu({2, 3, 5})},
              [](const Inputs& in) {
                return pad(in[0], {-1, 2, 1, -2});
              }},
             {"float64",
              {randu({3, 4}).to(DType::Float64)},
              [](const Inputs& in) {
                return pad(in[0], {2, 0, 1, 1}, 1.5);
              }},
             {"a permuted input, cropped and padded",
              {randu({2, 3, 4})},
              [](const Inputs& in) {
                return pad(in[0].permute({2, 0, 1}), {-1, 2, 1, 0});
              }},
         };
       }},
      {OpId::embed,
       [] {
         return std::vector<SampleInput>{
             {"strided, with a value",
              {randu({2, 3})},
              [](const Inputs& in) {
                return embed(in[0], {5, 7}, {1, 0}, {2, 3}, 0.25);
              }},
             {"a transposed source",
              {randu({3, 2})},
              [](const Inputs& in) {
                return embed(in[0].t(), {4, 6}, {0, 1}, {1, 2});
              }},
             {"laid out as a permuted tensor",
              {randu({2, 3})},
              [](const Inputs& in) {
                return embed(in[0], {3, 5}, {1, 0}, {1, 2}, -1.0, {1, 3});
              }},
             // Their gradients are embeds.
             {"select and a strided slice",
              {randu({3, 4, 5})},
              [](const Inputs& in) {
                return cat({in[0].select(1, 2), in[0].slice(2, 1, 5, 2).reshape({3, 8})}, 1);
              }},
             {"select of a permuted view, as q of qkv",
              {randu({2, 4, 6})},
              [](const Inputs& in) {
                const Tensor qkv = in[0].reshape({2, 4, 3, 2}).permute({2, 0, 1, 3});
                return qkv.select(0, 0) * qkv.select(0, 2) + qkv.select(0, 1);
              }},
         };
       }},
      // Values on a grid of 1/64 in [-1, 1], and a finite-difference step of 1/128: x ± step is
      // exact in bfloat16 (8 significant bits), so the differences through the rounding are exact
      // and the float64 gradient check means something for a cast. The analytic gradient comes
      // back through bfloat16 too, so it is the exact one rounded there (relative 2^-9).
      {OpId::cast_all,
       [] {
         const auto grid = [](const Shape& shape, uint64_t seed) {
           Generator gen(seed);
           std::vector<float> v(numel_of(shape));
           for (float& x : v) x = static_cast<float>(std::floor(gen.uniform() * 129.0) - 64.0) / 64.0f;
           return from_vector(v, shape);
         };
         // To bfloat16 and back, each result flattened into one tensor.
         const OpFn call = [](const Inputs& in) {
           std::vector<Tensor> back = cast_all(cast_all(in, DType::BFloat16), in.front().dtype());
           for (Tensor& t : back) t = t.reshape({-1});
           return cat(back, 0);
         };
         return std::vector<SampleInput>{
             {"three shapes", {grid({3, 4}, 1), grid({5}, 2), grid({2, 1, 3}, 3)}, call},
             {"a transposed tensor among them",
              {grid({3, 4}, 4), grid({4, 2}, 5)},
              [call](const Inputs& in) {
                return call({in[0], in[1].t()});
              }},
             {"one tensor longer than a block", {grid({700}, 6), grid({3}, 7)}, call, {}, false},
             {"a constant", {grid({2, 3}, 8), grid({4}, 9)}, call, {.no_grad = {0}}},
         };
       },
       true,
       {.eps = 1.0 / 128, .atol = 1e-6, .rtol = 1.0 / 256}},
  };
}

}  // namespace tessera::testing
