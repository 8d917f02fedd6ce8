// Samples of matmul and linear: every operand layout a GEMM plan translates (transposed, batched,
// broadcast batch, permuted batch dims, strided and expanded operands, vectors), every rank pairing,
// one operand constant, float64; linear with and without bias, a 1-d input, views.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

std::vector<OpInfo> linalg_ops() {
  return {
      {OpId::matmul,
       [] {
         const auto b = [](const Shape& shape) { return randu(shape, -1, 1, 2); };
         std::vector<SampleInput> s{
             {"2-d", {randu({5, 7}), b({7, 3})}, [](const Inputs& in) { return matmul(in[0], in[1]); }},
             {"transposed b", {randu({5, 7}), b({3, 7})}, [](const Inputs& in) { return matmul(in[0], in[1].t()); }},
             {"transposed a", {randu({7, 5}), b({7, 3})}, [](const Inputs& in) { return matmul(in[0].t(), in[1]); }},
             {"batched", {randu({4, 5, 7}), b({4, 7, 6})}, [](const Inputs& in) { return matmul(in[0], in[1]); }},
             {"broadcast batch",
              {randu({2, 1, 5, 7}), b({3, 7, 6})},
              [](const Inputs& in) { return matmul(in[0], in[1]); }},
             {"attention scores q·kᵀ",
              {randu({2, 3, 9, 4}), b({2, 3, 9, 4})},
              [](const Inputs& in) { return matmul(in[0], in[1].transpose(-2, -1)); }},
             {"permuted batch dims",
              {randu({3, 2, 5, 7}), b({2, 3, 7, 4})},
              [](const Inputs& in) {
                return matmul(in[0].permute({1, 0, 2, 3}), in[1]);
              }},
             {"vector operands",
              {randu({7}), b({7, 3}), randu({3})},
              [](const Inputs& in) { return matmul(matmul(in[0], in[1]), in[2]); }},
             {"float64",
              {randu({4, 6}).to(DType::Float64), b({6, 5}).to(DType::Float64)},
              [](const Inputs& in) { return matmul(in[0], in[1]); }},
         };
         const OpFn mm = [](const Inputs& in) { return matmul(in[0], in[1]); };
         // Every rank pairing: vector·vector, matrix·vector, broadcast batches against matrices and vectors.
         const std::vector<std::pair<Shape, Shape>> ranks = {
             {{3}, {3}},          {{2, 3}, {3}},       {{3}, {3, 2}},          {{2, 3}, {3, 4}},
             {{2, 2, 3}, {3, 2}}, {{2, 3}, {2, 3, 2}}, {{2, 2, 3}, {2, 3, 2}}, {{2, 1, 2, 3}, {3, 3, 2}},
             {{2, 2, 3}, {3}},    {{3}, {2, 3, 2}},
         };
         for (const auto& [sa, sb] : ranks)
           s.push_back({detail::concat(sa, " by ", sb), {randu(sa, -1, 1, 1), b(sb)}, mm});
         // Only one operand requiring grad (the other is not saved).
         s.push_back({"a constant b", {randu({2, 3}, -1, 1, 3), randu({3, 2}, -1, 1, 4)}, mm, {.no_grad = {1}}});
         s.push_back({"a constant a", {randu({2, 3}, -1, 1, 4), randu({3, 4}, -1, 1, 5)}, mm, {.no_grad = {0}}});
         // A strided slice and an expanded batch.
         s.push_back({"a permuted batch by a strided slice",
                      {randu({3, 2, 4}, -1, 1, 3), randu({4, 6}, -1, 1, 4)},
                      [](const Inputs& in) {
                        return matmul(in[0].permute({1, 0, 2}), in[1].slice(1, 0, 6, 2));
                      }});
         s.push_back(
             {"an expanded batch", {randu({3, 2, 4}, -1, 1, 3), randu({1, 4, 3}, -1, 1, 5)}, [](const Inputs& in) {
                return matmul(in[0], in[1].expand({3, 4, 3}));
              }});
         // The attention products on views of a qkv projection [B, N, 3·h·dh] (B 3, N 5, h 2, dh 4),
         // whose batch dims do not merge (sample stride N·3C, head stride dh): on a device each is one
         // strided-batch GEMM after a copy of the view (cuda/plans/gemm_plan.h).
         const auto heads = [](const Tensor& qkv, const Shape& order) {
           return unbind(qkv.reshape({3, 5, 3, 2, 4}).permute(order), 0);
         };
         const Tensor qkv = randu({3, 5, 24}, -1, 1, 6);
         s.push_back({"XCA: softmax map · v, v a view [B, h, dh, N]",
                      {randu({3, 2, 4, 4}, -1, 1, 7), qkv},
                      [heads](const Inputs& in) {
                        return matmul(in[0], heads(in[1], {2, 0, 3, 4, 1})[2]);
                      }});
         s.push_back({"XCA: q̂·k̂ᵀ over the tokens, both views [B, h, dh, N]", {qkv}, [heads](const Inputs& in) {
                        const std::vector<Tensor> t = heads(in[0], {2, 0, 3, 4, 1});
                        return matmul(t[0], t[1].transpose(-2, -1));
                      }});
         s.push_back({"talking heads: q·kᵀ and the map · v, views [B, h, N, dh]", {qkv}, [heads](const Inputs& in) {
                        const std::vector<Tensor> t = heads(in[0], {2, 0, 3, 1, 4});
                        return matmul(matmul(t[0], t[1].transpose(-2, -1)), t[2]);
                      }});
         s.push_back({"class attention: one query against k and v views",
                      {randu({3, 2, 1, 4}, -1, 1, 8), qkv},
                      [heads](const Inputs& in) {
                        const std::vector<Tensor> t = heads(in[1], {2, 0, 3, 1, 4});
                        return matmul(matmul(in[0], t[1].transpose(-2, -1)), t[2]);
                      }});
         s.push_back({"factor attention: softmax(k)ᵀ·v, then q·(kᵀv)", {qkv}, [heads](const Inputs& in) {
                        const std::vector<Tensor> t = heads(in[0], {2, 0, 3, 1, 4});
                        return matmul(t[0], matmul(softmax(t[1], 2).transpose(-1, -2), t[2]));
                      }});
         return s;
       }},
      {OpId::linear,
       [] {
         const Tensor x = randu({2, 9, 16}), w = randu({12, 16}, -0.5, 0.5, 3), bias = randu({12}, -0.5, 0.5, 4);
         return std::vector<SampleInput>{
             {"with bias", {x, w, bias}, [](const Inputs& in) { return linear(in[0], in[1], in[2]); }},
             {"without bias", {x, w}, [](const Inputs& in) { return linear(in[0], in[1]); }},
             {"1-d input", {randu({16}), w, bias}, [](const Inputs& in) { return linear(in[0], in[1], in[2]); }},
             // A non-contiguous input and a transposed weight view.
             {"views",
              {randu({2, 3, 4}, -1, 1, 1), randu({4, 5}, -1, 1, 5), randu({5}, -1, 1, 3)},
              [](const Inputs& in) { return linear(in[0].transpose(0, 1), in[1].t(), in[2]); }},
         };
       }},
  };
}

}  // namespace tessera::testing
