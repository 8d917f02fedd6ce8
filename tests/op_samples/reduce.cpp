// Samples of the reductions: every kind of dim set (the column path over leading dims of a
// contiguous tensor, in one pass up to 256 rows and in chunks beyond, which grow past 64 rows over
// 4096 rows; the row path for the rest), keepdim, rows longer than a block, odd sizes, an empty
// dim, sum_to as broadcasting's gradients use it, and argmax with ties.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

namespace {

std::vector<SampleInput> over_dim_sets(const Tensor& x, const std::vector<Shape>& dim_sets, bool both_keepdims,
                                       const std::function<Tensor(const Tensor&, const Shape&, bool)>& f) {
  std::vector<SampleInput> out;
  for (const Shape& dims : dim_sets)
    for (bool keepdim : {false, true}) {
      if (keepdim && !both_keepdims) continue;
      out.push_back({detail::concat("dims ", dims, keepdim ? " keepdim" : ""), {x}, [=](const Inputs& in) {
                       return f(in[0], dims, keepdim);
                     }});
    }
  return out;
}

// Built on first use: the table is read from other translation units (no namespace-scope lists).
std::vector<Shape> all_dim_sets() { return {{0}, {1}, {3}, {0, 1}, {1, 2}, {0, 3}, {0, 1, 2}, {}}; }
std::vector<Shape> some_dim_sets() { return {{0}, {2}, {1, 2}, {}}; }

}  // namespace

std::vector<OpInfo> reduce_ops() {
  return {
      {OpId::sum,
       [] {
         std::vector<SampleInput> s =
             over_dim_sets(randu({3, 5, 7, 4}), all_dim_sets(), true,
                           [](const Tensor& x, const Shape& d, bool k) { return sum(x, d, k); });
         const Tensor long_rows = randu({3, 3000}), odd = randu({37, 33});
         const auto dims = [](Shape d) { return [d](const Inputs& in) { return sum(in[0], d); }; };
         s.push_back({"3000-element rows", {long_rows}, dims({1}), {}, false});
         s.push_back({"columns over 3000 rows", {long_rows.t().contiguous()}, dims({0}), {}, false});
         // Over 64² rows the column path's chunks grow past 64 rows (cuda/kernels/reduce.cu). Sums of
         // 5000 values in [-1, 1) cancel to a few units; the device adds in double, the CPU in float32,
         // whose rounding (~1e-7 of the running sum, 5000 times) is all the difference.
         s.push_back(
             {"columns over 5000 rows", {randu({2, 2500, 5})}, dims({0, 1}), {.rtol = 1e-4, .atol = 1e-4}, false});
         // The tokens of [B, N, C] (XCA's norms): columns of each sample, in chunks past 256 rows.
         s.push_back(
             {"[3, 600, 7] over the middle dim", {randu({3, 600, 7})}, dims({1}), {.rtol = 1e-4, .atol = 1e-4}, false});
         s.push_back({"over 33", {odd}, dims({1})});
         s.push_back({"over 37", {odd}, dims({0})});
         s.push_back({"float64", {odd.to(DType::Float64)}, dims({0, 1})});
         s.push_back({"an empty dim", {zeros({4, 0, 3})}, dims({1}), {.backward = false}});
         s.push_back({"[3,4,2] over 0 and 2, keepdim", {randu({3, 4, 2})}, [](const Inputs& in) {
                        return sum(in[0], {0, 2}, true);
                      }});
         // Few outputs of many values each (talking heads' bias gradient: [B, h, N²] to h): split
         // across blocks in place, and after the transposed copy of a view (cuda/middle_sums.h).
         const auto split_tolerance = DeviceCheckOptions{.rtol = 1e-4, .atol = 1e-4};
         s.push_back({"[3, 4, 1500] over 0 and 2: 4 outputs of 4500 values",
                      {randu({3, 4, 1500})},
                      dims({0, 2}),
                      split_tolerance,
                      false});
         s.push_back({"a permuted view to 5 outputs of 6000 values",
                      {randu({4, 1500, 5})},
                      [](const Inputs& in) {
                        return sum(in[0].permute({2, 0, 1}), {1, 2});
                      },
                      split_tolerance,
                      false});
         return s;
       }},
      {OpId::mean,
       [] {
         std::vector<SampleInput> s =
             over_dim_sets(randu({3, 5, 7, 4}), all_dim_sets(), true,
                           [](const Tensor& x, const Shape& d, bool k) { return mean(x, d, k); });
         s.push_back({"a permuted view", {randu({3, 4, 2})}, [](const Inputs& in) {
                        return mean(in[0].permute({2, 0, 1}), {-1});
                      }});
         return s;
       }},
      {OpId::amax,
       [] {
         std::vector<SampleInput> s =
             over_dim_sets(randu({4, 6, 5}), some_dim_sets(), false,
                           [](const Tensor& x, const Shape& d, bool k) { return amax(x, d, k); });
         s.push_back(
             {"3000-element rows", {randu({3, 3000})}, [](const Inputs& in) { return amax(in[0], {1}); }, {}, false});
         s.push_back({"[3,4,2] over 0 and 1", {randu({3, 4, 2})}, [](const Inputs& in) {
                        return amax(in[0], {0, 1});
                      }});
         const auto over_rows = [](const Inputs& in) { return amax(in[0], {0}); };
         s.push_back({"columns over 5000 rows", {randu({5000, 3})}, over_rows, {}, false});
         s.push_back({"[2, 3, 2500] over 0 and 2: split across blocks",
                      {randu({2, 3, 2500})},
                      [](const Inputs& in) {
                        return amax(in[0], {0, 2});
                      },
                      {},
                      false});
         return s;
       }},
      {OpId::var,
       [] {
         std::vector<SampleInput> s =
             over_dim_sets(randu({4, 6, 5}), some_dim_sets(), false,
                           [](const Tensor& x, const Shape& d, bool) { return var(x, d, 1, true); });
         s.push_back(
             {"no correction, keepdim", {randu({3, 4, 2})}, [](const Inputs& in) { return var(in[0], {2}, 0, true); }});
         return s;
       }},
      {OpId::norm,
       [] {
         std::vector<SampleInput> s =
             over_dim_sets(randu({4, 6, 5}), some_dim_sets(), false,
                           [](const Tensor& x, const Shape& d, bool k) { return norm(x, d, k); });
         s.push_back({"a transposed view", {randu({4, 3})}, [](const Inputs& in) { return norm(in[0].t(), {0}); }});
         return s;
       }},
      {OpId::sum_to,
       [] {
         std::vector<SampleInput> s;
         for (const Shape& target : std::vector<Shape>{{5}, {3, 1}, {1, 3, 5}, {4, 1, 1}, {}})
           s.push_back({detail::concat("to ", target), {randu({4, 3, 5})}, [target](const Inputs& in) {
                          return sum_to(in[0], target);
                        }});
         // Broadcasting's gradient undone: an expanded [3,1] summed back to its shape.
         s.push_back({"of an expanded view", {randu({3, 1})}, [](const Inputs& in) {
                        return sum_to(in[0].expand({2, 3, 4}), {3, 1});
                      }});
         // A bias over maps [B, h, N·M] to its h values, as talking heads' mix has it.
         s.push_back({"[2, 3, 2400] to [3, 1]",
                      {randu({2, 3, 2400})},
                      [](const Inputs& in) {
                        return sum_to(in[0], {3, 1});
                      },
                      {.rtol = 1e-4, .atol = 1e-4},
                      false});
         return s;
       }},
      {OpId::argmax,
       [] {
         // Ties on purpose: rounded values repeat, so the first index of the maximum matters.
         const Tensor x = (randu({6, 300}) * 4.0).to(DType::Int64).to(DType::Float32);
         std::vector<SampleInput> s;
         for (int64_t dim : {0, 1})
           s.push_back({detail::concat("dim ", dim, " keepdim"), {x}, [dim](const Inputs& in) {
                          return argmax(in[0], dim, true);
                        }});
         s.push_back({"int64", {x.to(DType::Int64)}, [](const Inputs& in) { return argmax(in[0], 1); }});
         s.push_back({"bool", {gt(x, scalar_like(1.0, x))}, [](const Inputs& in) { return argmax(in[0], 1); }});
         return s;
       },
       false},
  };
}

}  // namespace tessera::testing
