// Samples of layer_norm (with and without affine parameters, rows across several of the backward's
// chunks, rows of exactly the warp kernels' 1,024 values and longer, one channel, float64),
// batch_norm in training and eval with its running statistics, and normalize.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

std::vector<OpInfo> normalization_ops() {
  return {
      {OpId::layer_norm,
       [] {
         std::vector<SampleInput> s;
         for (const Shape& shape : std::vector<Shape>{{5, 8}, {2, 3, 37}, {130, 24}, {3, 1024}, {2, 1300}}) {
           const int64_t C = shape.back();
           const Tensor x = randu(shape, -2, 2), w = randu({C}, 0.5, 1.5, 3), b = randu({C}, -0.5, 0.5, 4);
           const bool small = numel_of(shape) < 1000;
           s.push_back({detail::concat(shape, ", affine"),
                        {x, w, b},
                        [](const Inputs& in) { return layer_norm(in[0], in[1], in[2], 1e-6); },
                        {},
                        small});
           s.push_back({detail::concat(shape, ", no affine"),
                        {x},
                        [](const Inputs& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-5); },
                        {},
                        small});
           s.push_back({detail::concat(shape, ", weight only"),
                        {x, w},
                        [](const Inputs& in) { return layer_norm(in[0], in[1], Tensor(), 1e-5); },
                        {},
                        small});
         }
         // C = 1: every output is the bias. (Its input gradient is 0 analytically and rounding noise
         // times rstd = 1/sqrt(eps) numerically, which a fused multiply-add on one side changes:
         // forward only.)
         s.push_back({"one channel",
                      {randu({4, 1}), randu({1}), randu({1}, -1, 1, 5)},
                      [](const Inputs& in) { return layer_norm(in[0], in[1], in[2], 1e-6); },
                      {.backward = false}});
         s.push_back({"float64",
                      {randu({6, 10}).to(DType::Float64), randu({10}).to(DType::Float64),
                       randu({10}, 0, 1, 9).to(DType::Float64)},
                      [](const Inputs& in) { return layer_norm(in[0], in[1], in[2], 1e-6); }});
         s.push_back({"a transposed input",
                      {randu({5, 3}, -2, 2, 4), randu({5}, 0.5, 1.5, 2), randu({5}, -1, 1, 3)},
                      [](const Inputs& in) { return layer_norm(in[0].t(), in[1], in[2]); }});
         s.push_back({"bias only, eps 1e-2", {randu({6, 4}, -2, 2, 5), randu({4}, -1, 1, 7)}, [](const Inputs& in) {
                        return layer_norm(in[0], Tensor(), in[1], 1e-2);
                      }});
         return s;
       },
       true,
       {},
       {1, 2}},
      {OpId::batch_norm,
       [] {
         std::vector<SampleInput> s;
         // The last two: a channel's values in more than one chunk of planes (cuda/kernels/normalization.cu),
         // planes of 2000 values (4 to a chunk) and of 1 (8192 to a chunk), each with a partial chunk.
         for (const Shape& shape : std::vector<Shape>{{6, 4}, {3, 5, 4, 6}, {2, 3, 17, 1}, {5, 2, 2000}, {9000, 3}}) {
           const int64_t C = shape[1];
           const bool small = numel_of(shape) < 1000;  // the float64 gradient check: two evaluations per element
           const Inputs inputs{randu(shape, -2, 2), randu({C}, 0.5, 1.5, 3), randu({C}, -0.5, 0.5, 4),
                               randu({C}, -0.1, 0.1, 5), randu({C}, 0.5, 1.5, 6)};
           for (bool training : {true, false})
             // The updated running statistics are part of the result, concatenated after the output
             // (detached: the gradient is the output's). They are updated in place, so the training
             // samples are no function of the inputs for finite differences.
             s.push_back({detail::concat(shape, training ? ", training" : ", eval"),
                          inputs,
                          [training](const Inputs& in) {
                            Tensor y = batch_norm(in[0], in[3], in[4], in[1], in[2], training, 0.1, 1e-5);
                            return cat({y.reshape({-1}), in[3].detach().clone(), in[4].detach().clone()}, 0);
                          },
                          {.no_grad = {3, 4}},
                          !training && small});
         }
         // Training without running statistics is a function of the inputs: its gradient is checked
         // (with and without the affine parameters, and on a permuted [N, C, S] view).
         for (const Shape& shape : std::vector<Shape>{{3, 2, 2, 3}, {5, 3}}) {
           const int64_t C = shape[1];
           s.push_back({detail::concat(shape, ", training without running statistics"),
                        {randu(shape, -2, 2, 1), randu({C}, 0.5, 1.5, 2), randu({C}, -1, 1, 3)},
                        [](const Inputs& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); }});
           s.push_back({detail::concat(shape, ", training, no affine"), {randu(shape, -2, 2, 4)}, [](const Inputs& in) {
                          return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true);
                        }});
         }
         s.push_back({"training, a permuted [N, C, S] view, weight only",
                      {randu({2, 3, 4}, -2, 2, 6), randu({2}, 0.5, 1.5, 7)},
                      [](const Inputs& in) {
                        return batch_norm(in[0].permute({2, 0, 1}), Tensor(), Tensor(), in[1], Tensor(), true);
                      }});
         return s;
       },
       true,
       {},
       {1, 2, 3, 4}},
      {OpId::normalize,
       [] {
         std::vector<SampleInput> s;
         for (int64_t dim : {-1, 1})
           s.push_back({detail::concat("dim ", dim), {randu({4, 6, 5})}, [dim](const Inputs& in) {
                          return normalize(in[0], dim, 1e-12);
                        }});
         s.push_back({"a transposed input over dim 0", {randu({3, 4}, -2, 2, 2)}, [](const Inputs& in) {
                        return normalize(in[0].t(), 0);
                      }});
         // Row 1 is zero: ‖x‖ < eps there, so y = x/eps and the gradient is the finite g/eps. eps is
         // larger than the finite-difference step, so the perturbed row stays in the clamped regime.
         Tensor zero_row = randu({3, 4}, -2, 2, 3);
         zero_row.narrow(0, 1, 1).zero_();
         s.push_back({"a zero row, eps 1e-3", {zero_row}, [](const Inputs& in) { return normalize(in[0], 1, 1e-3); }});
         return s;
       }},
  };
}

}  // namespace tessera::testing
