// Samples of matmul and linear: every operand layout a GEMM plan translates (transposed, batched,
// broadcast batch, permuted batch dims, vectors), float64; linear with and without bias, 1-d input.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

std::vector<OpInfo> linalg_ops() {
  return {
      {"matmul",
       [] {
         const auto b = [](const Shape& shape) { return randu(shape, -1, 1, 2); };
         return std::vector<SampleInput>{
             {"2-d", {randu({5, 7}), b({7, 3})}, [](const Inputs& in) { return matmul(in[0], in[1]); }},
             {"transposed b", {randu({5, 7}), b({3, 7})}, [](const Inputs& in) { return matmul(in[0], in[1].t()); }},
             {"transposed a", {randu({7, 5}), b({7, 3})}, [](const Inputs& in) { return matmul(in[0].t(), in[1]); }},
             {"batched", {randu({4, 5, 7}), b({4, 7, 6})}, [](const Inputs& in) { return matmul(in[0], in[1]); }},
             {"broadcast batch", {randu({2, 1, 5, 7}), b({3, 7, 6})}, [](const Inputs& in) { return matmul(in[0], in[1]); }},
             {"attention scores q·kᵀ", {randu({2, 3, 9, 4}), b({2, 3, 9, 4})},
              [](const Inputs& in) { return matmul(in[0], in[1].transpose(-2, -1)); }},
             {"permuted batch dims", {randu({3, 2, 5, 7}), b({2, 3, 7, 4})},
              [](const Inputs& in) { return matmul(in[0].permute({1, 0, 2, 3}), in[1]); }},
             {"vector operands", {randu({7}), b({7, 3}), randu({3})},
              [](const Inputs& in) { return matmul(matmul(in[0], in[1]), in[2]); }},
             {"float64", {randu({4, 6}).to(DType::Float64), b({6, 5}).to(DType::Float64)},
              [](const Inputs& in) { return matmul(in[0], in[1]); }},
         };
       }},
      {"linear",
       [] {
         const Tensor x = randu({2, 9, 16}), w = randu({12, 16}, -0.5, 0.5, 3), bias = randu({12}, -0.5, 0.5, 4);
         return std::vector<SampleInput>{
             {"with bias", {x, w, bias}, [](const Inputs& in) { return linear(in[0], in[1], in[2]); }},
             {"without bias", {x, w}, [](const Inputs& in) { return linear(in[0], in[1]); }},
             {"1-d input", {randu({16}), w, bias}, [](const Inputs& in) { return linear(in[0], in[1], in[2]); }},
         };
       }},
  };
}

}  // namespace tessera::testing
