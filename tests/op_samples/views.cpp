// Samples of the views and copies: reshape (view, flatten, squeeze, unsqueeze), permute (transpose),
// slice (narrow), select, expand, and the copies clone, contiguous, to(dtype), copy_, fill_ and the
// in-place add_ and mul_. Views launch no kernel forward; their gradients do (a reshape of a
// non-viewable gradient copies), and the copies' kernels (copy, fill) are only reached here.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

namespace {
// `f` of a fresh, grad-free copy of in[0]: in-place ops refuse a tensor that requires grad.
OpFn in_place(std::function<void(Tensor&, const Inputs&)> f) {
  return [f](const Inputs& in) {
    NoGradGuard no_grad;
    Tensor y = in[0].clone();
    f(y, in);
    return y;
  };
}
}  // namespace

std::vector<OpInfo> view_ops() {
  return {
      {OpId::reshape,
       [] {
         const Tensor x = randu({2, 3, 4});
         return std::vector<SampleInput>{
             {"a view",
              {x},
              [](const Inputs& in) {
                return in[0].reshape({6, 4}) * 2.0;
              }},
             {"of a transposed tensor (copies)",
              {x},
              [](const Inputs& in) { return in[0].transpose(0, 2).reshape({-1}); }},
             {"flatten, unsqueeze, squeeze",
              {x},
              [](const Inputs& in) {
                return in[0].flatten(1).unsqueeze(0).squeeze(0).view({2, 12});
              }},
         };
       }},
      {OpId::permute,
       [] {
         return std::vector<SampleInput>{
             {"[2,3,4] to [4,2,3]",
              {randu({2, 3, 4})},
              [](const Inputs& in) {
                return in[0].permute({2, 0, 1}) * 2.0;
              }},
             {"t", {randu({3, 5})}, [](const Inputs& in) { return in[0].t().contiguous(); }},
         };
       }},
      {OpId::slice,
       [] {
         return std::vector<SampleInput>{
             {"with a step", {randu({6, 7})}, [](const Inputs& in) { return in[0].slice(1, 1, 7, 2) * 3.0; }},
             {"narrow twice",
              {randu({6, 7})},
              [](const Inputs& in) { return in[0].narrow(1, 2, 4).narrow(0, 1, 3) * 3.0; }},
         };
       }},
      {OpId::select,
       [] {
         return std::vector<SampleInput>{
             {"dim 1", {randu({3, 4, 2})}, [](const Inputs& in) { return in[0].select(1, 2) * 2.0; }},
             {"a negative index",
              {randu({3, 4})},
              [](const Inputs& in) { return in[0].select(0, -1) + in[0].select(0, 0); }},
         };
       }},
      {OpId::expand,
       [] {
         return std::vector<SampleInput>{
             {"[3,1] to [2,3,4]",
              {randu({3, 1})},
              [](const Inputs& in) {
                return in[0].expand({2, 3, 4}) * 2.0;
              }},
         };
       }},
      {OpId::clone,
       [] {
         return std::vector<SampleInput>{
             {"a transposed view", {randu({4, 5})}, [](const Inputs& in) { return in[0].t().clone(); }},
         };
       }},
      {OpId::contiguous,
       [] {
         return std::vector<SampleInput>{
             {"a permuted view",
              {randu({2, 3, 4})},
              [](const Inputs& in) {
                return in[0].permute({1, 2, 0}).contiguous();
              }},
             {"already contiguous", {randu({3, 4})}, [](const Inputs& in) { return in[0].contiguous() * 2.0; }},
         };
       }},
      {OpId::to,
       [] {
         return std::vector<SampleInput>{
             {"to float64 and back (float32 inputs: two casts)",
              {randu({3, 4})},
              [](const Inputs& in) { return in[0].to(DType::Float64).to(in[0].dtype()) * 2.0; }},
             {"to int64",
              {randu({3, 4}, -5.0, 5.0)},
              [](const Inputs& in) { return in[0].to(DType::Int64).to(in[0].dtype()); },
              {.backward = false}},
         };
       }},
      // Through float32 and back: the float64 check sees float32's rounding, hence its tolerances.
      {OpId::to,
       [] {
         return std::vector<SampleInput>{{"through float32", {randu({2, 3, 4})}, [](const Inputs& in) {
                                            return exp(in[0].to(DType::Float32).to(in[0].dtype()));
                                          }}};
       },
       true,
       GradcheckOptions{1e-3, 1e-4, 1e-3},
       {},
       false,
       "through float32"},
      {OpId::copy_,
       [] {
         return std::vector<SampleInput>{
             {"a broadcast row into a transposed view",
              {randu({4, 5}), randu({4}, -1, 1, 3)},
              in_place([](Tensor& y, const Inputs& in) { y.t().copy_(in[1]); }),
              {.backward = false}},
         };
       },
       false},
      // Tensors made on the operand's device, compared as one float64 vector.
      variant_of(
          OpId::fill_, "creation functions",
          [] {
            return std::vector<SampleInput>{{"on the operand's device", {randu({3, 4})}, [](const Inputs& in) {
                                               const Tensor& x = in[0];
                                               Tensor empty = empty_like(x);
                                               empty.fill_(1.5);
                                               std::vector<Tensor> made{
                                                   zeros_like(x),
                                                   ones_like(x),
                                                   full_like(x, 2.5),
                                                   empty,
                                                   scalar_tensor(3.0, DType::Float32, x.device()),
                                                   arange(0.5, 4.0, 0.75, DType::Float32, x.device()),
                                                   arange(5, DType::Int64, x.device())};
                                               for (Tensor& t : made) t = t.reshape({-1}).to(DType::Float64);
                                               return cat(made, 0);
                                             }}};
          },
          false),
      {OpId::fill_,
       [] {
         return std::vector<SampleInput>{
             {"a sliced view",
              {randu({4, 5})},
              in_place([](Tensor& y, const Inputs&) { y.slice(1, 1, 4).fill_(0.25); }),
              {.backward = false}},
         };
       },
       false},
      {OpId::add_,
       [] {
         // In place on a copy: a broadcast row, a scale, the destination a transposed view, and an
         // operand that is the destination itself in another order (which needs a new tensor).
         return std::vector<SampleInput>{{"in place",
                                          {randu({5, 5}), randu({5}, -1, 1, 3)},
                                          [](const Inputs& in) {
                                            NoGradGuard no_grad;
                                            Tensor y = in[0].clone();
                                            y.add_(in[1], 2.0).mul_(0.5);
                                            y.t().add_(in[1]);
                                            y.add_(y.t());
                                            return y;
                                          },
                                          {.backward = false}}};
       },
       false},
      {OpId::mul_,
       [] {
         return std::vector<SampleInput>{
             {"a transposed view by a scalar",
              {randu({4, 5})},
              in_place([](Tensor& y, const Inputs&) { y.t().mul_(-1.5); }),
              {.backward = false}},
         };
       },
       false},
  };
}

}  // namespace tessera::testing
