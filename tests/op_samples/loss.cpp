// Samples of the losses: cross_entropy with 1, 10 and 1000 classes (more than a block), with and
// without label smoothing, float64; soft_cross_entropy with the gradient of its soft targets.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

std::vector<OpInfo> loss_ops() {
  return {
      {"cross_entropy",
       [] {
         std::vector<SampleInput> s;
         for (int64_t C : {1, 10, 1000}) {
           std::vector<int64_t> t(6);
           for (int64_t i = 0; i < 6; ++i) t[i] = (i * 7) % C;
           const Inputs inputs{randu({6, C}, -3, 3), from_vector(t, {6})};
           for (double smoothing : {0.0, 0.1})
             s.push_back({detail::concat(C, " classes, smoothing ", smoothing), inputs,
                          [smoothing](const Inputs& in) { return cross_entropy(in[0], in[1], smoothing); }, {}, C < 1000});
         }
         s.push_back({"float64", {randu({3, 5}).to(DType::Float64), ints({4, 0, 2})},
                      [](const Inputs& in) { return cross_entropy(in[0], in[1], 0.2); }});
         return s;
       }},
      {"soft_cross_entropy",
       [] {
         return std::vector<SampleInput>{{"[5,12]", {randu({5, 12}, -3, 3), softmax(randu({5, 12}, -1, 1, 17), -1)},
                                          [](const Inputs& in) { return soft_cross_entropy(in[0], in[1]); }}};
       }},
  };
}

}  // namespace tessera::testing
