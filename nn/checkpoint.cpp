#include "tessera/nn/checkpoint.h"

#include <optional>

#include "tessera/autograd/function.h"
#include "tessera/core/autocast.h"
#include "tessera/ops/creation.h"

namespace tessera::nn {

namespace {

thread_local bool recomputing_now = false;

// Grad mode on for the scope (the engine runs backward closures with it off).
class EnableGrad {
 public:
  EnableGrad() : previous_(autograd::grad_enabled()) { autograd::set_grad_enabled(true); }
  ~EnableGrad() { autograd::set_grad_enabled(previous_); }
  EnableGrad(const EnableGrad&) = delete;
  EnableGrad& operator=(const EnableGrad&) = delete;

 private:
  bool previous_;
};

// The default generator at `offset` of `seed` for the scope, then back where it was.
class RewoundGenerator {
 public:
  RewoundGenerator(uint64_t seed, uint64_t offset)
      : seed_(default_generator().seed()), offset_(default_generator().offset()) {
    default_generator().seed(seed);
    default_generator().set_offset(offset);
  }
  ~RewoundGenerator() {
    default_generator().seed(seed_);
    default_generator().set_offset(offset_);
  }
  RewoundGenerator(const RewoundGenerator&) = delete;
  RewoundGenerator& operator=(const RewoundGenerator&) = delete;

 private:
  uint64_t seed_, offset_;
};

class Recomputing {
 public:
  Recomputing() : previous_(recomputing_now) { recomputing_now = true; }
  ~Recomputing() { recomputing_now = previous_; }
  Recomputing(const Recomputing&) = delete;
  Recomputing& operator=(const Recomputing&) = delete;

 private:
  bool previous_;
};

}  // namespace

bool recomputing() { return recomputing_now; }

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x) {
  if (!autograd::needs_grad({x})) return fn(x);
  const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  const std::optional<DType> autocast = autocast_dtype(x.device());
  Tensor y;
  {
    NoGradGuard no_grad;
    y = fn(x.detach());
  }
  autograd::record("CheckpointBackward", {x}, y,
                   [fn = std::move(fn), sx = SavedTensor(x), seed, offset, autocast, device = x.device()](
                       const Tensor& g, const GradMask&) {
                     Tensor input = sx.unpack("checkpoint").detach();
                     input.set_requires_grad(true);
                     Tensor again;
                     {
                       EnableGrad grad_on;
                       Recomputing recompute;
                       RewoundGenerator rewound(seed, offset);
                       std::optional<AutocastGuard> cast;
                       if (autocast) cast.emplace(device.type, *autocast);
                       again = fn(input);
                     }
                     TS_CHECK(again.shape() == g.shape(), "checkpoint: the recomputed output has shape ", again.shape(),
                              " but the forward gave ", g.shape(),
                              " (the checkpointed function must compute the same function again)");
                     if (again.requires_grad()) again.backward(g);
                     return std::vector<Tensor>{input.grad()};
                   });
  return y;
}

}  // namespace tessera::nn
