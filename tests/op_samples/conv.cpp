// Samples of conv2d and conv1d: dense (padded, strided stem, patch embedding, 1x1, dilated and
// rectangular), grouped and depthwise, each with and without bias; depthwise on token maps
// (channels innermost); conv1d; float64.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

namespace {

struct Conv {
  const char* name;
  Shape x, w;
  std::array<int64_t, 2> stride, padding, dilation;
  int64_t groups;
};

// Built on first use (Shape is a vector: a namespace-scope array of them is initialised at run time,
// in an order across translation units that nothing fixes).
std::vector<Conv> convs() {
  return {
      {"3x3 padded", {2, 3, 7, 6}, {5, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {"conv stem: 3x3 stride 2", {2, 3, 9, 9}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},
      {"patch embedding: 4x4 stride 4", {2, 3, 8, 8}, {6, 3, 4, 4}, {4, 4}, {0, 0}, {1, 1}, 1},
      {"1x1", {2, 8, 4, 5}, {3, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},
      {"dilated, rectangular", {1, 2, 9, 8}, {3, 2, 3, 2}, {2, 1}, {2, 0}, {2, 3}, 1},
      {"grouped", {2, 6, 5, 5}, {9, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3},
      {"depthwise 3x3", {2, 8, 6, 6}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 8},
      {"depthwise 5x5 stride 2", {1, 4, 9, 9}, {4, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 4},
  };
}

}  // namespace

std::vector<OpInfo> conv_ops() {
  return {
      {OpId::conv2d,
       [] {
         std::vector<SampleInput> s;
         for (const Conv& c : convs()) {
           const Tensor x = randu(c.x), w = randu(c.w, -0.5, 0.5, 3), b = randu({c.w[0]}, -0.5, 0.5, 4);
           s.push_back({std::string(c.name) + ", bias", {x, w, b}, [c](const Inputs& in) {
                          return conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups);
                        }});
           s.push_back({std::string(c.name) + ", no bias", {x, w}, [c](const Inputs& in) {
                          return conv2d(in[0], in[1], Tensor(), c.stride, c.padding, c.dilation, c.groups);
                        }});
         }
         s.push_back({"float64",
                      {randu({1, 2, 5, 5}).to(DType::Float64), randu({3, 2, 3, 3}, -1, 1, 3).to(DType::Float64)},
                      [](const Inputs& in) {
                        return conv2d(in[0], in[1], Tensor(), {1, 1}, {1, 1});
                      }});
         // A channels-last input (a permuted view of [N, H, W, C]), grouped, asymmetric stride.
         s.push_back({"channels-last input, groups 2",
                      {randu({2, 5, 4, 4}, -1, 1, 4), randu({6, 2, 3, 2}, -1, 1, 2), randu({6}, -1, 1, 3)},
                      [](const Inputs& in) {
                        return conv2d(in[0].permute({0, 3, 1, 2}), in[1], in[2], {2, 1}, {1, 0}, {1, 2}, 2);
                      }});
         // Depthwise convolutions of token maps, as XCiT's LPI and CoaT's position encodings make
         // them: tokens [B, H·W, C] seen as [B, C, H, W] (channels innermost), read as they lie and
         // the output laid out the same way (ops/kernels/conv.h); the upstream
         // gradient comes back through the map to tokens. The larger map has more output positions
         // than one chunk of the device's filter-gradient sums (cuda/kernels/conv_depthwise.cu).
         const auto token_map = [](const Tensor& tokens, int64_t H) {
           return tokens.transpose(1, 2).reshape({tokens.size(0), tokens.size(2), H, tokens.size(1) / H});
         };
         const auto depthwise_tokens = [token_map](int64_t H, int64_t k, std::array<int64_t, 2> stride,
                                                   std::array<int64_t, 2> dilation, bool bias) {
           return [=](const Inputs& in) {
             const std::array<int64_t, 2> pad{k / 2 * dilation[0], k / 2 * dilation[1]};
             const Tensor y =
                 conv2d(token_map(in[0], H), in[1], bias ? in[2] : Tensor(), stride, pad, dilation, in[0].size(2));
             return y.flatten(2).transpose(1, 2);  // back to tokens
           };
         };
         const Tensor tokens = randu({2, 30, 6}, -1, 1, 8), w3 = randu({6, 1, 3, 3}, -1, 1, 9),
                      b6 = randu({6}, -1, 1, 10);
         s.push_back({"depthwise 3x3 of a token map", {tokens, w3, b6}, depthwise_tokens(5, 3, {1, 1}, {1, 1}, true)});
         s.push_back(
             {"depthwise 3x3 of a token map, no bias", {tokens, w3}, depthwise_tokens(5, 3, {1, 1}, {1, 1}, false)});
         s.push_back({"depthwise 3x3 of a token map, stride 2, dilation 2",
                      {tokens, w3, b6},
                      depthwise_tokens(5, 3, {2, 2}, {2, 2}, true)});
         s.push_back({"depthwise 5x5 of a token map, only the bias takes a gradient",
                      {tokens, randu({6, 1, 5, 5}, -1, 1, 11), b6},
                      depthwise_tokens(6, 5, {1, 1}, {1, 1}, true),
                      {.no_grad = {0, 1}}});
         // 29 channels: whole SIMD packets, a half packet and single channels of the channels-last
         // kernel (ops/cpu/conv_depthwise_channels_last.cpp) in float32 and float64.
         s.push_back({"depthwise 3x3 of a token map with 29 channels",
                      {randu({2, 30, 29}, -1, 1, 15), randu({29, 1, 3, 3}, -1, 1, 16), randu({29}, -1, 1, 17)},
                      depthwise_tokens(5, 3, {1, 1}, {1, 1}, true)});
         s.push_back({"depthwise 3x3 of a 17x17 token map",
                      {randu({2, 289, 3}, -1, 1, 12), randu({3, 1, 3, 3}, -1, 1, 13), randu({3}, -1, 1, 14)},
                      depthwise_tokens(17, 3, {1, 1}, {1, 1}, true),
                      {},
                      false});
         // One of the three taking a gradient: each of the backward's three paths alone.
         const Inputs one{randu({1, 2, 4, 4}, -1, 1, 5), randu({3, 2, 3, 3}, -1, 1, 6), randu({3}, -1, 1, 7)};
         const OpFn padded = [](const Inputs& in) { return conv2d(in[0], in[1], in[2], {1, 1}, {1, 1}); };
         s.push_back({"only the input takes a gradient", one, padded, {.no_grad = {1, 2}}});
         s.push_back({"only the weight takes a gradient", one, padded, {.no_grad = {0, 2}}});
         s.push_back({"only the bias takes a gradient", one, padded, {.no_grad = {0, 1}}});
         return s;
       },
       true,
       {},
       {2}},
      {OpId::conv1d,
       [] {
         return std::vector<SampleInput>{
             {"stride 2, padding 1",
              {randu({2, 4, 11}), randu({5, 4, 3}, -0.5, 0.5, 3), randu({5})},
              [](const Inputs& in) { return conv1d(in[0], in[1], in[2], 2, 1); }},
             {"depthwise",
              {randu({2, 4, 6}, -1, 1, 4), randu({4, 1, 3}, -1, 1, 5), randu({4}, -1, 1, 6)},
              [](const Inputs& in) { return conv1d(in[0], in[1], in[2], 1, 1, 1, 4); }},
             {"a transposed input [N, L, C]",
              {randu({2, 5, 4}, -1, 1, 7), randu({3, 4, 2}, -1, 1, 8), randu({3}, -1, 1, 9)},
              [](const Inputs& in) { return conv1d(in[0].transpose(1, 2), in[1], in[2], 2, 0, 1, 1); }},
         };
       },
       true,
       {},
       {2}},
  };
}

}  // namespace tessera::testing
