// Samples of the fused ops (ops/fused.h): rows across several of the backward's fixed chunks of rows
// (cuda/column_sums.h), a per-sample scale, erf and tanh GELU, token counts below, at and above a
// block, a zero row (a norm clamped to eps), float64; depthwise convolutions with GELU of NCHW maps
// and of token maps (channels innermost).
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

namespace {

Inputs float64(const Inputs& in) {
  Inputs out;
  for (const Tensor& t : in) out.push_back(t.to(DType::Float64));
  return out;
}

// The samples of an op of three operands whose shapes follow from one: for each shape, and a float64 one.
std::vector<SampleInput> shaped(const std::vector<Shape>& shapes, const std::function<Inputs(const Shape&)>& make,
                                const Shape& float64_shape, const OpFn& call) {
  std::vector<SampleInput> s;
  for (const Shape& shape : shapes) s.push_back({detail::concat(shape), make(shape), call, {}, numel_of(shape) <= 400});
  s.push_back({"float64", float64(make(float64_shape)), call});
  return s;
}

}  // namespace

std::vector<OpInfo> fused_ops() {
  return {
      {OpId::layer_scale_residual,
       [] {
         std::vector<SampleInput> s;
         for (const Shape& shape : std::vector<Shape>{{3, 7}, {2, 5, 37}, {4, 70, 24}, {1, 1, 300}}) {
           const Tensor x = randu(shape, -2, 2), f = randu(shape, -1, 1, 3),
                        gamma = randu({shape.back()}, -0.5, 0.5, 4);
           const bool small = numel_of(shape) <= 400;
           s.push_back({detail::concat(shape),
                        {x, f, gamma},
                        [](const Inputs& in) { return layer_scale_residual(in[0], in[1], in[2]); },
                        {},
                        small});
           // Stochastic depth's per-sample scale: a constant, so it takes no gradient.
           s.push_back({detail::concat(shape, ", sample scale"),
                        {x, f, gamma, randu({shape[0]}, 0, 2, 5)},
                        [](const Inputs& in) { return layer_scale_residual(in[0], in[1], in[2], in[3]); },
                        {.no_grad = {3}},
                        small});
         }
         s.push_back({"float64", float64({randu({3, 9, 16}), randu({3, 9, 16}, -1, 1, 2), randu({16}, -1, 1, 3)}),
                      [](const Inputs& in) { return layer_scale_residual(in[0], in[1], in[2]); }});
         // x and f transposed views [6, 4] seen as [4, 6]; 4-D tokens with a per-sample scale.
         s.push_back({"transposed x and f, sample scale",
                      {randu({6, 4}, -1, 1, 4), randu({6, 4}, -1, 1, 5), randu({6}, -1, 1, 3), randu({4}, 0, 2, 6)},
                      [](const Inputs& in) { return layer_scale_residual(in[0].t(), in[1].t(), in[2], in[3]); },
                      {.no_grad = {3}}});
         s.push_back(
             {"4-D, sample scale",
              {randu({2, 3, 2, 6}, -1, 1, 6), randu({2, 3, 2, 6}, -1, 1, 7), randu({6}, -1, 1, 3), randu({2}, 0, 2, 8)},
              [](const Inputs& in) { return layer_scale_residual(in[0], in[1], in[2], in[3]); },
              {.no_grad = {3}}});
         return s;
       },
       true,
       {},
       {2, 3}},
      {OpId::linear_gelu,
       [] {
         std::vector<SampleInput> s;
         for (const Shape& shape : std::vector<Shape>{{3, 8}, {2, 70, 16}, {130, 5}})
           for (int64_t out : {int64_t{12}, int64_t{33}}) {
             const Inputs inputs{randu(shape, -2, 2), randu({out, shape.back()}, -0.5, 0.5, 3),
                                 randu({out}, -0.5, 0.5, 4)};
             // The weight and bias gradients sum 140 rows of terms of both signs: the last-bit
             // differences of the two devices' erf/tanh (each within 1e-7 relative) add up to about
             // 1e-5 of the result.
             for (bool approximate : {false, true})
               s.push_back({detail::concat(shape, " to ", out, approximate ? ", tanh" : ", erf"),
                            inputs,
                            [approximate](const Inputs& v) { return linear_gelu(v[0], v[1], v[2], approximate); },
                            {.atol = 1e-5},
                            shape[0] == 3});
           }
         s.push_back({"float64", float64({randu({4, 6}), randu({5, 6}, -1, 1, 2), randu({5}, -1, 1, 3)}),
                      [](const Inputs& v) { return linear_gelu(v[0], v[1], v[2]); }});
         s.push_back({"transposed input and weight",
                      {randu({4, 3}, -2, 2, 4), randu({4, 5}, -1, 1, 5), randu({5}, -1, 1, 3)},
                      [](const Inputs& v) { return linear_gelu(v[0].t(), v[1].t(), v[2]); }});
         return s;
       },
       true,
       {},
       {2}},
      {OpId::xca_attention_map,
       [] {
         const OpFn call = [](const Inputs& in) { return xca_attention_map(in[0], in[1], in[2]); };
         std::vector<SampleInput> s = shaped(
             {{1, 1, 4, 1}, {1, 1, 4, 6}, {2, 3, 8, 17}, {1, 2, 48, 20}},
             [](const Shape& shape) {
               return Inputs{randu(shape, -2, 2), randu(shape, -1, 1, 3), randu({shape[1], 1, 1}, 0.5, 2, 4)};
             },
             {2, 2, 5, 7}, call);
         // A channel of q that is zero over every token (its norm clamped to eps): finite
         // differences step across the clamp's kink, so no gradient check.
         Tensor q = randu({1, 2, 4, 5});
         q.narrow(2, 2, 1).zero_();
         s.push_back({"a zero row", {q, randu({1, 2, 4, 5}, -1, 1, 3), randu({2, 1, 1}, 0.5, 2, 4)}, call, {}, false});
         // As XCA takes them: q and k views [B, h, d, N] of qkv projections [B, N, 3·h·d] (on a device
         // copied once for the GEMMs, their norms taken over the copies' last dim).
         const auto heads = [](const Tensor& qkv, int64_t which) {
           return unbind(qkv.reshape({2, 7, 3, 2, 4}).permute({2, 0, 3, 4, 1}), 0)[static_cast<size_t>(which)];
         };
         s.push_back(
             {"q and k viewed out of qkv projections",
              {randu({2, 7, 24}, -2, 2), randu({2, 7, 24}, -1, 1, 3), randu({2, 1, 1}, 0.5, 2, 4)},
              [heads](const Inputs& in) { return xca_attention_map(heads(in[0], 0), heads(in[1], 1), in[2]); }});
         s.push_back({"q and k stored [B, h, N, d]",
                      {randu({2, 2, 7, 3}, -1, 1, 4), randu({2, 2, 7, 3}, -1, 1, 5), randu({2, 1, 1}, 0.5, 2, 3)},
                      [](const Inputs& in) {
                        return xca_attention_map(in[0].transpose(-2, -1), in[1].transpose(-2, -1), in[2]);
                      }});
         return s;
       },
       true,
       {},
       {2}},
      {OpId::xca_attention,
       [] {
         // Each shape is {B, N, h, d}: qkv [B, N, 3·h·d], temperature [h, 1, 1].
         const OpFn call = [](const Inputs& in) { return xca_attention(in[0], in[1], in[1].size(0)); };
         const auto make = [](const Shape& bnhd) {
           return Inputs{randu({bnhd[0], bnhd[1], 3 * bnhd[2] * bnhd[3]}, -2, 2), randu({bnhd[2], 1, 1}, 0.5, 2, 4)};
         };
         // d = 1, 3, 8 and 17 (17² map entries: more than a block's threads), N = 1, 5 and 40 (N·d
         // above a block's threads).
         std::vector<SampleInput> s =
             shaped({{1, 1, 1, 1}, {1, 5, 2, 3}, {2, 5, 3, 3}, {2, 40, 3, 8}, {1, 3, 1, 17}}, make, {2, 5, 2, 3}, call);
         // A channel of q that is zero over every token (its norm clamped to eps): finite
         // differences step across the clamp's kink, so no gradient check.
         Tensor qkv = randu({2, 5, 12});
         qkv.narrow(2, 1, 1).zero_();
         s.push_back({"a zero channel of q", {qkv, randu({2, 1, 1}, 0.5, 2, 4)}, call, {}, false});
         // The projection stored [B, 3·h·d, N] (channels not unit-stride: copied once) and a slice of a
         // wider one (unit-stride channels, tokens 3·h·d + 5 apart: read in place).
         s.push_back({"qkv transposed, a negative temperature",
                      {randu({2, 18, 4}, -1, 1, 5), randu({2, 1, 1}, -2, -0.5, 6)},
                      [](const Inputs& in) { return xca_attention(in[0].transpose(1, 2), in[1], 2); }});
         s.push_back({"qkv sliced out of a wider tensor",
                      {randu({2, 6, 23}, -1, 1, 7), randu({3, 1, 1}, 0.5, 2, 8)},
                      [](const Inputs& in) { return xca_attention(in[0].narrow(2, 2, 18), in[1], 3); }});
         return s;
       },
       true,
       {},
       {1}},
      {OpId::factor_attention,
       [] {
         // Each shape is {B, N, h, d}: qkv [B, N, 3·h·d], cv [B, h, N−1, d].
         const OpFn call = [](const Inputs& in) { return factor_attention(in[0], in[1], in[1].size(1), 0.35); };
         const auto make = [](const Shape& bnhd) {
           return Inputs{randu({bnhd[0], bnhd[1], 3 * bnhd[2] * bnhd[3]}, -2, 2),
                         randu({bnhd[0], bnhd[2], bnhd[1] - 1, bnhd[3]}, -1, 1, 3)};
         };
         // d = 1, 3, 8 (CoaT-Lite's first stage), 40 and 64 (CoaT-Lite Small's third and fourth) and 70
         // (beyond the CUDA kernels' chunk of 64×64 entries of a d×d product: chunks of 64 and 6
         // channels each way, one pass over the tokens each); N = 1 (the CLS token alone, cv empty), 5,
         // 40 (N·d above a block's threads) and 300; on CUDA several tiles of tokens at each d (128
         // tokens a tile at d = 8, 25 at d = 40, 16 at d ≥ 64), the last partial.
         std::vector<SampleInput> s = shaped({{1, 1, 1, 1},
                                              {1, 5, 2, 3},
                                              {2, 5, 3, 3},
                                              {2, 40, 3, 8},
                                              {1, 300, 1, 8},
                                              {2, 60, 2, 40},
                                              {1, 40, 2, 64},
                                              {1, 20, 1, 70}},
                                             make, {2, 5, 2, 3}, call);
         // The projection stored [B, 3·h·d, N] (channels not unit-stride: copied once) with cv stored
         // [B, h, d, N−1] as CRPE's convolution leaves it, and a slice of a wider projection (unit-stride
         // channels, tokens 3·h·d + 5 apart: read in place) with a negative scale.
         s.push_back({"qkv transposed, cv stored [B, h, d, N−1]",
                      {randu({2, 18, 4}, -1, 1, 5), randu({2, 2, 3, 3}, -1, 1, 6)},
                      [](const Inputs& in) {
                        return factor_attention(in[0].transpose(1, 2), in[1].transpose(-1, -2), 2, 0.5);
                      }});
         // d = 8 with the heads side by side (the CPU's all-heads-at-once kernel) and cv strided.
         s.push_back({"d = 8, cv stored [B, h, d, N−1]",
                      {randu({2, 10, 48}, -1, 1, 9), randu({2, 2, 8, 9}, -1, 1, 10)},
                      [](const Inputs& in) { return factor_attention(in[0], in[1].transpose(-1, -2), 2, 0.5); }});
         s.push_back({"qkv sliced out of a wider tensor, a negative scale",
                      {randu({2, 6, 23}, -1, 1, 7), randu({2, 3, 5, 2}, -1, 1, 8)},
                      [](const Inputs& in) { return factor_attention(in[0].narrow(2, 2, 18), in[1], 3, -0.7); }});
         return s;
       }},
      {OpId::factor_attention_merge,
       [] {
         // {1, 1, 1, 3}: the CLS token alone, whose row has no position term (cv is empty).
         std::vector<SampleInput> s = shaped(
             {{1, 1, 1, 3}, {2, 3, 10, 4}, {1, 8, 50, 8}},
             [](const Shape& shape) {
               const Shape image{shape[0], shape[1], shape[2] - 1, shape[3]};
               return Inputs{randu(shape, -2, 2), randu(shape, -1, 1, 3), randu(image, -1, 1, 4)};
             },
             {2, 2, 5, 3}, [](const Inputs& in) { return factor_attention_merge(in[0], in[1], in[2], 0.25); });
         s.push_back({"each operand stored [B, h, d, N], a negative scale",
                      {randu({1, 3, 2, 4}, -1, 1, 4), randu({1, 3, 2, 4}, -1, 1, 5), randu({1, 3, 2, 3}, -1, 1, 6)},
                      [](const Inputs& in) {
                        return factor_attention_merge(in[0].transpose(-1, -2), in[1].transpose(-1, -2),
                                                      in[2].transpose(-1, -2), -1.5);
                      }});
         return s;
       }},
      {OpId::class_attention,
       [] {
         // Token counts below, at and above the block's 256 threads.
         std::vector<SampleInput> s = shaped(
             {{1, 1, 1, 3}, {2, 3, 10, 4}, {1, 2, 300, 8}},
             [](const Shape& shape) {
               const Shape query{shape[0], shape[1], 1, shape[3]};
               return Inputs{randu(query, -2, 2), randu(shape, -1, 1, 3), randu(shape, -1, 1, 4)};
             },
             {2, 2, 5, 3}, [](const Inputs& in) { return class_attention(in[0], in[1], in[2], 0.5); });
         s.push_back({"q stored [B, d, 1, h], k and v [B, h, d, N], a negative scale",
                      {randu({1, 4, 1, 3}, -1, 1, 4), randu({1, 3, 4, 6}, -1, 1, 5), randu({1, 3, 4, 6}, -1, 1, 6)},
                      [](const Inputs& in) {
                        return class_attention(in[0].permute({0, 3, 2, 1}), in[1].transpose(-1, -2),
                                               in[2].transpose(-1, -2), -1.2);
                      }});
         return s;
       }},
      {OpId::xnorm_matmul,
       [] {
         const OpFn call = [](const Inputs& in) { return xnorm_matmul(in[0], in[1], in[2]); };
         std::vector<SampleInput> s = shaped(
             {{1, 1, 1, 3}, {2, 3, 10, 4}, {1, 4, 70, 8}},
             [](const Shape& shape) {
               return Inputs{randu(shape, -2, 2), randu({shape[0], shape[1], shape[3], 5}, -1, 1, 3),
                             randu({shape[1], 1, 1}, 0.5, 2, 4)};
             },
             {2, 2, 5, 3}, call);
         // A query that is zero (its norm clamped to eps): no gradient check, as above.
         Tensor q = randu({1, 2, 4, 3});
         q.narrow(2, 1, 1).zero_();
         s.push_back(
             {"a zero query", {q, randu({1, 2, 3, 3}, -1, 1, 3), randu({2, 1, 1}, 0.5, 2, 4)}, call, {}, false});
         s.push_back(
             {"q and ctx transposed, a negative gamma",
              {randu({1, 2, 3, 6}, -1, 1, 4), randu({1, 2, 2, 3}, -1, 1, 5), randu({2, 1, 1}, -2, -0.5, 6)},
              [](const Inputs& in) { return xnorm_matmul(in[0].transpose(-1, -2), in[1].transpose(-1, -2), in[2]); }});
         return s;
       },
       true,
       {},
       {2}},
      {OpId::talking_heads_attention,
       [] {
         // Inputs qkv [B, N, 3·h·dh], w_l, w_w [h, h], then the biases b_l, b_w [h] where given.
         auto inputs = [](int64_t B, int64_t N, int64_t h, int64_t dh, bool biases) {
           Inputs in{randu({B, N, 3 * h * dh}, -2, 2), randu({h, h}, -1, 1, 3), randu({h, h}, -1, 1, 4)};
           if (biases) in.insert(in.end(), {randu({h}, -0.5, 0.5, 5), randu({h}, -0.5, 0.5, 6)});
           return in;
         };
         auto call = [](int64_t h, const std::function<Tensor(const Tensor&)>& view = nullptr) {
           return OpFn([h, view](const Inputs& in) {
             const Tensor none;
             return talking_heads_attention(view ? view(in[0]) : in[0], h, 0.6, in[1], in.size() > 3 ? in[3] : none,
                                            in[2], in.size() > 4 ? in[4] : none);
           });
         };
         std::vector<SampleInput> s;
         struct Case {
           int64_t B, N, h, dh;
           bool biases;
         };
         for (const Case& c : std::vector<Case>{{1, 1, 1, 1, true},
                                                {2, 5, 2, 4, true},
                                                {1, 5, 3, 1, false},
                                                {2, 17, 3, 4, true},
                                                {1, 17, 2, 1, false}})
           s.push_back(
               {detail::concat("B ", c.B, ", N ", c.N, ", h ", c.h, ", dh ", c.dh, c.biases ? "" : ", no biases"),
                inputs(c.B, c.N, c.h, c.dh, c.biases), call(c.h)});
         s.push_back({"float64", float64(inputs(2, 5, 2, 4, true)), call(2)});
         // On CUDA (ops/kernels/talking_heads_attention.h), with the 227 KB a block may use once its
         // kernel opts in: tiles of 16 query rows in the forward (50 KB) and in the backward's query
         // pass (100 KB), of 16 keys in its key pass, the last of each partial; in 48 KB
         // (TESSERA_SHARED_OPT_IN=0) 15 and 7 rows. CaiT-S's 8 heads of 196 tokens: 16 rows in both
         // passes (99 and 197 KB; 7 and 3 rows in 48 KB). And more heads than a thread mixes, which runs
         // the composition there (without biases: its b_l gradient is rounding noise around the
         // kernels' exact zero, 1e-2 in bfloat16).
         s.push_back(
             {"B 2, N 200, h 4, dh 2: several tiles", inputs(2, 200, 4, 2, true), call(4), {.atol = 1e-5}, false});
         s.push_back(
             {"B 1, N 196, h 8, dh 1: CaiT-S's tiles", inputs(1, 196, 8, 1, true), call(8), {.atol = 1e-5}, false});
         s.push_back({"h 17: the composition on CUDA", inputs(1, 3, 17, 1, false), call(17)});
         // qkv stored [B, 3·C, N] (copied to unit channel stride), and a slice of wider rows (read in place).
         s.push_back({"qkv transposed",
                      {randu({2, 12, 5}, -2, 2), randu({2, 2}, -1, 1, 3), randu({2, 2}, -1, 1, 4)},
                      call(2, [](const Tensor& x) { return x.transpose(1, 2); })});
         Inputs wide = inputs(1, 6, 2, 3, true);
         wide[0] = randu({1, 6, 25}, -2, 2);
         s.push_back({"qkv a slice of wider rows", wide, call(2, [](const Tensor& x) { return x.narrow(2, 3, 18); })});
         return s;
       },
       true,
       {},
       {1, 2, 3, 4}},
      {OpId::depthwise_conv2d_gelu,
       [] {
         using Pair = std::array<int64_t, 2>;
         const auto call = [](Pair stride, Pair padding, Pair dilation, bool bias) {
           return [=](const Inputs& in) {
             return depthwise_conv2d_gelu(in[0], in[1], bias ? in[2] : Tensor(), stride, padding, dilation);
           };
         };
         // As XCiT's LPI makes them: tokens [B, H·W, C] seen as [B, C, H, W] (channels innermost),
         // the output mapped back to tokens, so the upstream gradient arrives in token layout too.
         const auto on_tokens = [](int64_t H, const OpFn& op) {
           return [=](const Inputs& in) {
             const Tensor& t = in[0];
             Inputs mapped = in;
             mapped[0] = t.transpose(1, 2).reshape({t.size(0), t.size(2), H, t.size(1) / H});
             return op(mapped).flatten(2).transpose(1, 2);
           };
         };
         const Tensor x = randu({2, 8, 6, 6}, -1, 1), w = randu({8, 1, 3, 3}, -1, 1, 3), b = randu({8}, -1, 1, 4);
         const Tensor tokens = randu({2, 30, 6}, -1, 1, 8), w6 = randu({6, 1, 3, 3}, -1, 1, 9),
                      b6 = randu({6}, -1, 1, 10);
         const OpFn padded = call({1, 1}, {1, 1}, {1, 1}, true);
         return std::vector<SampleInput>{
             {"3x3 padded", {x, w, b}, padded},
             {"3x3 padded, no bias", {x, w}, call({1, 1}, {1, 1}, {1, 1}, false)},
             {"5x5 stride 2",
              {randu({1, 4, 9, 9}, -1, 1, 5), randu({4, 1, 5, 5}, -0.5, 0.5, 6), randu({4}, -1, 1, 7)},
              call({2, 2}, {2, 2}, {1, 1}, true)},
             {"3x3 of a token map", {tokens, w6, b6}, on_tokens(5, padded)},
             // Whole SIMD packets, a half packet and single channels of the channels-last kernel.
             {"3x3 of a token map with 29 channels",
              {randu({2, 30, 29}, -1, 1, 18), randu({29, 1, 3, 3}, -1, 1, 19), randu({29}, -1, 1, 20)},
              on_tokens(5, padded)},
             {"3x3 of a token map, stride 2, dilation 2",
              {tokens, w6, b6},
              on_tokens(5, call({2, 2}, {2, 2}, {2, 2}, true))},
             // More output positions than one chunk of the device's filter-gradient sums.
             {"3x3 of a 17x17 token map",
              {randu({2, 289, 3}, -1, 1, 12), randu({3, 1, 3, 3}, -1, 1, 13), randu({3}, -1, 1, 14)},
              on_tokens(17, padded),
              {},
              false},
             {"only the input takes a gradient", {x, w, b}, padded, {.no_grad = {1, 2}}},
             {"only the bias takes a gradient", {tokens, w6, b6}, on_tokens(5, padded), {.no_grad = {0, 1}}},
             {"float64",
              float64({randu({1, 3, 5, 4}, -1, 1, 15), randu({3, 1, 3, 3}, -1, 1, 16), randu({3}, -1, 1, 17)}), padded},
         };
       },
       true,
       {},
       {2}},
  };
}

}  // namespace tessera::testing
