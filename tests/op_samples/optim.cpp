// Samples of the optimizer ops, in-place updates over lists of tensors (optim_list: one launch walks
// tensors of every size): Adam(W) from state and from its first steps, float32 and float64, the
// single-tensor form with a strided gradient; SGD with momentum, dampening, nesterov; sum_of_squares;
// scale_ by a device factor and by a number; lerp_ at weights on both sides of torch's switch of
// formula; unscale_ with and without a non-finite gradient. Each sample's call updates copies of its
// inputs and returns every updated tensor (state included), flattened, as one float64 tensor.
#include <algorithm>
#include <limits>

#include "tessera/ops/optim.h"
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

namespace {

// Built on first use, not at namespace scope: another translation unit (tests/cuda/
// test_optim_steps.cpp) reads these lists while it initialises, before this one may have been.
const std::vector<Shape>& list_shapes() {
  static const std::vector<Shape> shapes{{1}, {37, 5}, {0}, {}, {331, 317}, {33}};
  return shapes;
}

using Lists = std::vector<std::vector<Tensor>>;

Inputs join(const Lists& lists) {
  Inputs out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

std::vector<Tensor> squared(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t * t);
  return out;
}

// A sample whose `update` works on copies of its inputs, split into lists of list_shapes().size(), and returns the
// tensors to compare.
SampleInput update_sample(const std::string& name, const Lists& lists,
                          std::function<std::vector<Tensor>(Lists&)> update) {
  return {name,
          join(lists),
          [update](const Inputs& in) {
            Lists parts;
            const size_t n = list_shapes().size();
            for (size_t k = 0; k * n < in.size(); ++k) {
              parts.emplace_back();
              for (size_t i = k * n; i < std::min(in.size(), (k + 1) * n); ++i) parts.back().push_back(in[i].clone());
            }
            std::vector<Tensor> flat;
            for (const Tensor& t : update(parts)) flat.push_back(t.reshape({-1}).to(DType::Float64));
            return cat(flat, 0);
          },
          {.backward = false, .noncontiguous = false}};
}

std::vector<Tensor> joined(std::vector<Tensor> a, const std::vector<Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

std::vector<Tensor> optim_list(uint64_t seed, DType dtype) {
  Generator gen(seed);
  std::vector<Tensor> out;
  for (const Shape& s : list_shapes()) out.push_back(randn(s, dtype, &gen));
  return out;
}

std::vector<OpInfo> optim_ops() {
  return {
      {OpId::adamw_update_,
       [] {
         std::vector<SampleInput> s;
         for (DType dtype : {DType::Float32, DType::Float64})
           for (bool decoupled : {true, false}) {
             const AdamConfig config{2e-3, 0.85, 0.995, 1e-6, 0.05, decoupled};
             const std::string name = detail::concat(dtype_name(dtype), decoupled ? " AdamW" : " Adam with L2");
             // params, grads, exp_avgs, exp_avg_sqs (the second moments non-negative).
             s.push_back(update_sample(
                 name + " from state",
                 {optim_list(1, dtype), optim_list(2, dtype), optim_list(3, dtype), squared(optim_list(4, dtype))},
                 [config](Lists& t) {
                   for (int64_t step = 4; step <= 6; ++step) adamw_update_(t[0], t[1], t[2], t[3], config, step);
                   return joined(joined(t[0], t[2]), t[3]);
                 }));
             // Step 1 creates the state on the parameters' device.
             s.push_back(
                 update_sample(name + " first steps", {optim_list(1, dtype), optim_list(2, dtype)}, [config](Lists& t) {
                   std::vector<Tensor> m, v;
                   for (int64_t step = 1; step <= 2; ++step) adamw_update_(t[0], t[1], m, v, config, step);
                   return joined(joined(t[0], m), v);
                 }));
           }
         // The single-tensor form with a gradient that is a strided view.
         s.push_back({"one tensor, strided gradient",
                      {randu({9, 7}), randu({7, 9})},
                      [](const Inputs& in) {
                        Tensor p = in[0].clone(), m, v;
                        adamw_update_(p, in[1].t(), m, v, 1e-2, 0.9, 0.999, 1e-8, 0.1, 1);
                        return cat({p.reshape({-1}), m.reshape({-1}), v.reshape({-1})}, 0);
                      },
                      {.backward = false, .noncontiguous = false}});
         return s;
       },
       false},
      {OpId::sgd_update_,
       [] {
         const std::vector<std::pair<const char*, SgdConfig>> configs{
             {"plain", {0.1, 0.0, 0.0, 0.0, false}},      {"weight decay", {0.1, 0.0, 0.0, 1e-2, false}},
             {"momentum", {0.05, 0.9, 0.0, 1e-3, false}}, {"dampening", {0.05, 0.9, 0.3, 0.0, false}},
             {"nesterov", {0.05, 0.8, 0.0, 1e-2, true}},
         };
         std::vector<SampleInput> s;
         const auto steps = [](SgdConfig config, int n) {
           return [config, n](Lists& t) {
             std::vector<Tensor> bufs;
             // The first step sets the buffers from the gradient; the next ones blend into them.
             for (int step = 0; step < n; ++step) sgd_update_(t[0], t[1], bufs, config, step == 0);
             return joined(t[0], bufs);  // no buffers without momentum
           };
         };
         for (const auto& [name, config] : configs)
           s.push_back(update_sample(name, {optim_list(5), optim_list(6)}, steps(config, 3)));
         s.push_back(update_sample("float64 nesterov", {optim_list(5, DType::Float64), optim_list(6, DType::Float64)},
                                   steps({0.05, 0.8, 0.0, 1e-2, true}, 2)));
         return s;
       },
       false},
      {OpId::sum_of_squares,
       [] {
         std::vector<SampleInput> s;
         for (DType dtype : {DType::Float32, DType::Float64})
           s.push_back(update_sample(dtype_name(dtype), {optim_list(7, dtype)},
                                     [](Lists& t) { return std::vector<Tensor>{sum_of_squares(t[0])}; }));
         return s;
       },
       false},
      {OpId::scale_,
       [] {
         return std::vector<SampleInput>{
             update_sample("by a 0-d float64 tensor", {optim_list(8)},
                           [](Lists& t) {
                             scale_(t[0], full({}, 0.37, DType::Float64, t[0][0].device()));
                             return t[0];
                           }),
             // A float32 one-element factor computed on the device (converted to float64 there).
             update_sample("by a computed factor", {optim_list(8), optim_list(9)},
                           [](Lists& t) {
                             scale_(t[0], sqrt(sum_of_squares(t[1])).to(DType::Float32).reshape({1}) * 0.01);
                             return t[0];
                           }),
             update_sample("by a number", {optim_list(8, DType::Float64)},
                           [](Lists& t) {
                             scale_(t[0], -1.5);
                             return t[0];
                           }),
         };
       },
       false},
      {OpId::lerp_,
       [] {
         std::vector<SampleInput> s;
         for (double weight : {0.0, 0.1, 0.4999, 0.5, 0.73, 1.0})
           s.push_back(
               update_sample(detail::concat("weight ", weight), {optim_list(10), optim_list(11)}, [weight](Lists& t) {
                 lerp_(t[0], t[1], weight);
                 return t[0];
               }));
         // Ends of another dtype are converted to self's.
         s.push_back(
             update_sample("float64 from float32 ends", {optim_list(10, DType::Float64), optim_list(11)}, [](Lists& t) {
               lerp_(t[0], t[1], 0.9);
               return t[0];
             }));
         return s;
       },
       false},
      {OpId::unscale_,
       [] {
         std::vector<Tensor> inf_grads = optim_list(12);
         inf_grads[5].narrow(0, 3, 1).fill_(std::numeric_limits<double>::infinity());
         // Returns the flag and the first `kept` gradients (an inf compares with no tolerance).
         const auto unscale = [](size_t kept) {
           return [kept](Lists& t) {
             const Tensor found_inf = unscale_(t[0], full({}, 0.25, DType::Float32, t[0][0].device()));
             return joined(std::vector<Tensor>(t[0].begin(), t[0].begin() + static_cast<std::ptrdiff_t>(kept)),
                           {found_inf});
           };
         };
         return std::vector<SampleInput>{update_sample("finite", {optim_list(12)}, unscale(list_shapes().size())),
                                         update_sample("an inf", {inf_grads}, unscale(list_shapes().size() - 1))};
       },
       false},
  };
}

}  // namespace tessera::testing
