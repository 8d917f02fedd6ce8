// Samples of softmax and log_softmax: over the last dim (rows, one of size 1, rows longer than a
// block) and over leading and middle dims (CoaT's k.softmax(dim=2)), float64, large logits.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

namespace {

OpInfo softmax_like(const std::string& name, Tensor (*f)(const Tensor&, int64_t)) {
  return {name, [=] {
            std::vector<SampleInput> s;
            for (const Shape& shape : std::vector<Shape>{{4, 7}, {2, 3, 33}, {3, 1}, {2, 1500}})
              s.push_back({detail::concat("last dim of ", shape), {randu(shape, -4.0, 4.0)},
                           [f](const Inputs& in) { return f(in[0], -1); }, {}, shape.back() < 1000});
            const Tensor x = randu({2, 3, 9, 5}, -4.0, 4.0);  // [B, heads, N, d]
            for (int64_t dim : {0, 1, 2})
              s.push_back({detail::concat("dim ", dim, " of [2,3,9,5]"), {x}, [f, dim](const Inputs& in) { return f(in[0], dim); }});
            s.push_back({"float64, dim 2", {x.to(DType::Float64)}, [f](const Inputs& in) { return f(in[0], 2); }});
            s.push_back({"large logits stay finite", {x * 200.0}, [f](const Inputs& in) { return f(in[0], -1); }});
            return s;
          }};
}

}  // namespace

std::vector<OpInfo> softmax_ops() { return {softmax_like("softmax", softmax), softmax_like("log_softmax", log_softmax)}; }

}  // namespace tessera::testing
