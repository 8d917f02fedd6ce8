// Samples of the elementwise ops, random draws and dropout: unary ops on any sign and on positive
// inputs, binary ops with broadcasting both ways, scalar operands, float64, comparisons, where and
// int64 arithmetic, and dropout / drop-path masks drawn from a fixed generator.
#include "tessera/nn/layers.h"
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

namespace {

OpInfo unary(OpId name, std::function<Tensor(const Tensor&)> f, double lo = -1.0, double hi = 1.0,
             std::string variant = {}) {
  return variant_of(name, variant, [=] {
    return std::vector<SampleInput>{
        {"6x9", {randu({6, 9}, lo, hi)}, [f](const Inputs& in) { return f(in[0]); }},
        {"one element", {randu({1}, lo, hi, 3)}, [f](const Inputs& in) { return f(in[0]); }},
        {"a transposed view", {randu({4, 3}, lo, hi, 4)}, [f](const Inputs& in) { return f(in[0].t()); }},
    };
  });
}

OpInfo binary(OpId name, std::function<Tensor(const Tensor&, const Tensor&)> f, bool base_first = true) {
  return variant_of(name, {}, [=] {
    const Tensor a = randu({4, 1, 5}), b = randu({3, 1}, 0.5, 1.5, 11);
    // Positive operands, so every op (pow included) takes them in either order.
    const Tensor pa = randu({2, 3, 4}, 0.5, 2.0, 1), pb = randu({3, 1}, 0.5, 2.0, 2);
    const OpFn call = [f](const Inputs& in) { return f(in[0], in[1]); };
    return std::vector<SampleInput>{
        // pow's base is the positive operand.
        {"broadcast [4,1,5] with [3,1]", base_first ? Inputs{a, b} : Inputs{b, a}, call},
        {"[2,3,4] with [3,1]", {pa, pb}, call},
        {"[3,1] with [2,3,4]", {pb, pa}, call},
        {"with a 0-d tensor", {pa, randu({}, 0.5, 2.0, 3)}, call},
        {"a permuted view with a sliced one",
         {pa, randu({3, 2}, 0.5, 2.0, 4)},
         [f](const Inputs& in) {
           return f(in[0].permute({2, 1, 0}), in[1].slice(1, 0, 1));
         }},
    };
  });
}

OpInfo comparison(OpId name, Tensor (*f)(const Tensor&, const Tensor&)) {
  return {name,
          [=] {
            const Tensor a = randu({5, 6}), b = randu({6}, -1, 1, 3);
            const Tensor ia = (a * 10.0).to(DType::Int64), ib = (b * 10.0).to(DType::Int64);
            const OpFn call = [f](const Inputs& in) { return f(in[0], in[1]); };
            return std::vector<SampleInput>{{"float32 broadcast", {a, b}, call}, {"int64 broadcast", {ia, ib}, call}};
          },
          false};
}

}  // namespace

std::vector<OpInfo> elementwise_ops() {
  std::vector<OpInfo> ops = {
      unary(OpId::neg, [](const Tensor& t) { return -t; }),
      unary(OpId::exp, [](const Tensor& t) { return exp(t); }),
      unary(OpId::tanh, [](const Tensor& t) { return tanh(t); }),
      unary(OpId::erf, [](const Tensor& t) { return erf(t); }),
      unary(OpId::sin, [](const Tensor& t) { return sin(t); }),
      unary(OpId::cos, [](const Tensor& t) { return cos(t); }),
      unary(OpId::abs, [](const Tensor& t) { return abs(t); }),
      unary(OpId::sigmoid, [](const Tensor& t) { return sigmoid(t); }),
      unary(OpId::silu, [](const Tensor& t) { return silu(t); }),
      unary(OpId::relu, [](const Tensor& t) { return relu(t); }),
      unary(OpId::gelu, [](const Tensor& t) { return gelu(t); }),
      unary(
          OpId::gelu, [](const Tensor& t) { return gelu(t, true); }, -1.0, 1.0, "tanh form"),
      unary(
          OpId::pow, [](const Tensor& t) { return pow(t, 2.0); }, -1.0, 1.0, "exponent 2"),
      unary(
          OpId::pow, [](const Tensor& t) { return pow(t, 3.0); }, -1.0, 1.0, "exponent 3"),
      unary(OpId::clamp, [](const Tensor& t) { return clamp(t, -0.3, 0.4); }),
      unary(
          OpId::clamp, [](const Tensor& t) { return clamp(t, -0.5, 0.5); }, 0.7, 2.0, "every input outside"),
      unary(
          OpId::relu, [](const Tensor& t) { return relu(t); }, -2.0, -0.1, "negative inputs"),
      unary(
          OpId::pow, [](const Tensor& t) { return pow(t, -1.0); }, 0.5, 2.0, "exponent -1"),
      unary(
          OpId::pow, [](const Tensor& t) { return pow(t, 2.5); }, 0.5, 2.0, "exponent 2.5"),
      unary(OpId::clamp_min, [](const Tensor& t) { return clamp_min(t, -0.3); }),
      unary(OpId::clamp_max, [](const Tensor& t) { return clamp_max(t, 0.4); }),
      // Ops defined on positive inputs only.
      unary(
          OpId::log, [](const Tensor& t) { return log(t); }, 0.1, 2.0),
      unary(
          OpId::sqrt, [](const Tensor& t) { return sqrt(t); }, 0.1, 2.0),
      unary(
          OpId::rsqrt, [](const Tensor& t) { return rsqrt(t); }, 0.1, 2.0),
      unary(
          OpId::pow, [](const Tensor& t) { return pow(t, 0.5); }, 0.1, 2.0, "exponent 0.5"),
      binary(OpId::add, [](const Tensor& a, const Tensor& b) { return a + b; }),
      binary(OpId::sub, [](const Tensor& a, const Tensor& b) { return a - b; }),
      binary(OpId::mul, [](const Tensor& a, const Tensor& b) { return a * b; }),
      binary(OpId::div, [](const Tensor& a, const Tensor& b) { return a / b; }),
      binary(
          OpId::pow, [](const Tensor& a, const Tensor& b) { return pow(a, b); }, false),
      binary(OpId::maximum, [](const Tensor& a, const Tensor& b) { return maximum(a, b); }),
      binary(OpId::minimum, [](const Tensor& a, const Tensor& b) { return minimum(a, b); }),
      variant_of(OpId::mul, "scalar operands",
                 [] {
                   return std::vector<SampleInput>{{"[4,1,5]", {randu({4, 1, 5})}, [](const Inputs& in) {
                                                      return (2.0 - in[0]) * 3.0 / (in[0] + 4.0);
                                                    }}};
                 }),
      variant_of(OpId::mul, "float64",
                 [] {
                   return std::vector<SampleInput>{
                       {"broadcast",
                        {randu({4, 1, 5}).to(DType::Float64), randu({3, 1}, 0.5, 1.5, 11).to(DType::Float64)},
                        [](const Inputs& in) { return in[0] * in[1] + in[0]; }}};
                 }),
      // Contiguous operands take whole 16-byte vectors and the last n mod W elements one by one
      // (cuda/map.h); views that start off a 16-byte boundary take the strided path.
      variant_of(OpId::mul, "contiguous and misaligned operands",
                 [] {
                   std::vector<SampleInput> s;
                   for (int64_t n : {3, 4, 9, 37}) {
                     const Inputs inputs{randu({n}), randu({n}, 0.5, 1.5, 12)};
                     s.push_back({detail::concat(n, " elements"), inputs, [](const Inputs& in) {
                                    return (exp(in[0]) * in[1] + in[0]).to(DType::Float64).to(in[0].dtype());
                                  }});
                     s.push_back({detail::concat(n, " elements from the second"), inputs, [n](const Inputs& in) {
                                    const Tensor a = in[0].narrow(0, 1, n - 1), b = in[1].narrow(0, 1, n - 1);
                                    return (exp(a) * b + a).to(DType::Float64).to(a.dtype());
                                  }});
                   }
                   return s;
                 }),
      comparison(OpId::eq, eq),
      comparison(OpId::ne, ne),
      comparison(OpId::lt, lt),
      comparison(OpId::le, le),
      comparison(OpId::gt, gt),
      comparison(OpId::ge, ge),
      {OpId::where,
       [] {
         const Tensor a = randu({5, 6}), b = randu({6}, -1, 1, 3);
         return std::vector<SampleInput>{
             {"broadcast", {gt(a, b), a, b}, [](const Inputs& in) { return where(in[0], in[1], in[2]); }}};
       }},
      {OpId::masked_fill,
       [] {
         const Tensor a = randu({5, 6}), b = randu({6}, -1, 1, 3);
         return std::vector<SampleInput>{{"broadcast mask", {a, lt(b, scalar_like(0.0, b))}, [](const Inputs& in) {
                                            return masked_fill(in[0], in[1], -9.0);
                                          }}};
       }},
      {OpId::add,
       [] {
         const Tensor ia = (randu({5, 6}) * 10.0).to(DType::Int64), ib = (randu({6}, -1, 1, 3) * 10.0).to(DType::Int64);
         return std::vector<SampleInput>{
             {"add, mul", {ia, ib}, [](const Inputs& in) { return in[0] + in[1] * in[1]; }},
             {"maximum", {ia, ib}, [](const Inputs& in) { return maximum(in[0], in[1]); }},
         };
       },
       false,
       {},
       {},
       false,
       "int64"},
      // The masks are drawn from a generator of fixed seed, on the input's device.
      {OpId::dropout,
       [] {
         return std::vector<SampleInput>{
             {"p 0.3",
              {randu({8, 5, 6})},
              [](const Inputs& in) {
                Generator gen(5);
                return dropout(in[0], 0.3, true, &gen);
              }},
             {"p 0.5, a transposed input",
              {randu({5, 6}, -2, 2, 1)},
              [](const Inputs& in) {
                Generator gen(12);
                return dropout(in[0].t(), 0.5, true, &gen);
              }},
             {"p 1: all dropped",
              {randu({5, 6}, -2, 2, 1)},
              [](const Inputs& in) { return dropout(in[0], 1.0, true); }},
             {"eval: the identity",
              {randu({5, 6}, -2, 2, 1)},
              [](const Inputs& in) { return dropout(in[0], 0.5, false) * 2.0; }},
         };
       }},
      {OpId::drop_path,
       [] {
         return std::vector<SampleInput>{{"p 0.25", {randu({8, 5, 6})}, [](const Inputs& in) {
                                            Generator gen(6);
                                            return nn::drop_path(in[0], 0.25, true, &gen);
                                          }}};
       }},
      {OpId::drop_path_scale,
       [] {
         return std::vector<SampleInput>{{"p 0.25", {randu({8, 5, 6})}, [](const Inputs& in) {
                                            Generator gen(6);
                                            return nn::drop_path_scale(in[0], 0.25, true, &gen);
                                          }}};
       },
       false,
       {},
       {},
       true},
      // In eval: the fused residual without a sample scale (training draws from the default generator).
      {OpId::drop_path_residual,
       [] {
         return std::vector<SampleInput>{
             {"eval", {randu({2, 5, 6}), randu({2, 5, 6}, -1, 1, 3), randu({6}, -0.5, 0.5, 4)}, [](const Inputs& in) {
                return nn::drop_path_residual(in[0], in[1], in[2], 0.2, false);
              }}};
       },
       true,
       {},
       {2}},
  };
  return ops;
}

}  // namespace tessera::testing
