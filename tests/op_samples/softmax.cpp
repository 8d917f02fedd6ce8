// Samples of softmax and log_softmax: over the last dim (rows, one of size 1, rows of exactly the
// warp kernels' 1,024 values and longer, cuda/warp_rows.h) and over leading and middle dims (CoaT's k.softmax(dim=2), tiles of columns), float64,
// large logits.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

namespace {

OpInfo softmax_like(OpId name, Tensor (*f)(const Tensor&, int64_t)) {
  return {name, [=] {
            std::vector<SampleInput> s;
            for (const Shape& shape : std::vector<Shape>{{4, 7}, {2, 3, 33}, {3, 1}, {3, 1024}, {2, 1500}})
              s.push_back({detail::concat("last dim of ", shape),
                           {randu(shape, -4.0, 4.0)},
                           [f](const Inputs& in) { return f(in[0], -1); },
                           {},
                           shape.back() < 1000});
            const Tensor x = randu({2, 3, 9, 5}, -4.0, 4.0);  // [B, heads, N, d]
            for (int64_t dim : {0, 1, 2})
              s.push_back({detail::concat("dim ", dim, " of [2,3,9,5]"), {x}, [f, dim](const Inputs& in) {
                             return f(in[0], dim);
                           }});
            s.push_back({"float64, dim 2", {x.to(DType::Float64)}, [f](const Inputs& in) { return f(in[0], 2); }});
            s.push_back({"large logits stay finite", {x * 200.0}, [f](const Inputs& in) { return f(in[0], -1); }});
            for (int64_t dim : {0, 1, 2})
              s.push_back({detail::concat("dim ", dim, " of [3,4,5]"),
                           {randu({3, 4, 5}, -2, 2)},
                           [f, dim](const Inputs& in) { return f(in[0], dim); }});
            // The column path's tiles (cuda/kernels/softmax.cu): CoaT's K, 8 channels over more tokens
            // than a block has lanes; 40 columns, two tiles, the second partial; large logits.
            const Tensor tokens = randu({2, 2, 300, 8}, -4.0, 4.0, 4), wide = randu({2, 100, 40}, -4.0, 4.0, 5);
            const auto over = [f](int64_t dim) { return [f, dim](const Inputs& in) { return f(in[0], dim); }; };
            s.push_back({"CoaT's K: 8 channels over 300 tokens", {tokens}, over(2), {}, false});
            s.push_back({"40 columns over 100 rows", {wide}, over(1), {}, false});
            s.push_back({"large logits over a column", {wide * 300.0}, over(1), {}, false});
            // A narrow middle dim walked in groups of rows with a partial last group (7 rows, 2 per group).
            s.push_back(
                {"a narrow middle dim", {randu({2, 7, 100}, -2, 2, 3)}, [f](const Inputs& in) { return f(in[0], 1); }});
            // A non-contiguous input, a non-contiguous upstream gradient (a transposed output), and the
            // input used twice (the gradient accumulates with the direct path).
            const Tensor m = randu({4, 6}, -2, 2, 2);
            s.push_back({"a transposed input", {m}, [f](const Inputs& in) { return f(in[0].t(), 1); }});
            s.push_back({"a transposed input, over dim 0", {m}, [f](const Inputs& in) { return f(in[0].t(), 0); }});
            s.push_back({"a transposed output", {m}, [f](const Inputs& in) { return f(in[0], 1).t(); }});
            s.push_back({"the input used twice", {m}, [f](const Inputs& in) { return f(in[0], 1) * in[0]; }});
            return s;
          }};
}

}  // namespace

std::vector<OpInfo> softmax_ops() {
  return {softmax_like(OpId::softmax, softmax), softmax_like(OpId::log_softmax, log_softmax)};
}

}  // namespace tessera::testing
