// Samples of the losses: cross_entropy with 1, 10 and 1000 classes (more than a block), with and
// without label smoothing, float64; soft_cross_entropy with the gradient of its soft targets.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

std::vector<OpInfo> loss_ops() {
  return {
      {OpId::cross_entropy,
       [] {
         std::vector<SampleInput> s;
         for (int64_t C : {1, 10, 1000}) {
           std::vector<int64_t> t(6);
           for (int64_t i = 0; i < 6; ++i) t[i] = (i * 7) % C;
           const Inputs inputs{randu({6, C}, -3, 3), from_vector(t, {6})};
           for (double smoothing : {0.0, 0.1})
             s.push_back({detail::concat(C, " classes, smoothing ", smoothing),
                          inputs,
                          [smoothing](const Inputs& in) { return cross_entropy(in[0], in[1], smoothing); },
                          {},
                          C < 1000});
         }
         s.push_back({"float64", {randu({3, 5}).to(DType::Float64), ints({4, 0, 2})}, [](const Inputs& in) {
                        return cross_entropy(in[0], in[1], 0.2);
                      }});
         const Tensor t = ints({1, 0, 4, 1});
         for (double smoothing : {0.0, 0.2})
           s.push_back(
               {detail::concat("a view of the logits, scaled, smoothing ", smoothing),
                {randu({4, 5}, -2, 2, 1), t},
                [smoothing](const Inputs& in) { return cross_entropy(in[0].t().t(), in[1], smoothing) * 3.0; }});
         s.push_back({"transposed logits", {randu({5, 4}, -2, 2, 2), t}, [](const Inputs& in) {
                        return cross_entropy(in[0].t(), in[1], 0.1);
                      }});
         return s;
       },
       true,
       {},
       {},
       true},
      {OpId::soft_cross_entropy,
       [] {
         const OpFn call = [](const Inputs& in) { return soft_cross_entropy(in[0], in[1]); };
         const Tensor p = softmax(randu({4, 5}, -1, 1, 3), 1);
         return std::vector<SampleInput>{
             // Targets that require grad (e.g. made by a teacher network) get d/dq = (lse − x)/N.
             {"[5,12], targets with a gradient", {randu({5, 12}, -3, 3), softmax(randu({5, 12}, -1, 1, 17), -1)}, call},
             {"constant targets", {randu({4, 5}, -2, 2, 1), p}, call, {.no_grad = {1}}},
             {"transposed logits",
              {randu({5, 4}, -2, 2, 2), p},
              [](const Inputs& in) { return soft_cross_entropy(in[0].t(), in[1]); },
              {.no_grad = {1}}},
         };
       },
       true,
       {},
       {},
       true},
  };
}

}  // namespace tessera::testing
