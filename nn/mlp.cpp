#include "tessera/nn/mlp.h"

#include "tessera/ops/ops.h"

namespace tessera::nn {

Mlp::Mlp(int64_t dim, int64_t hidden, double drop) : drop_(drop) {
  fc1 = register_module("fc1", std::make_shared<Linear>(dim, hidden));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, dim));
}

void init_trunc_normal(Mlp& mlp, double std) {
  init_trunc_normal(*mlp.fc1, std);
  init_trunc_normal(*mlp.fc2, std);
}

Tensor Mlp::forward(const Tensor& x) {
  ForwardScope scope(*this);
  // fc1 and GELU in one op (ops/linear_gelu.h): the bias and the activation take one pass over the
  // hidden activations, the widest tensor of the block.
  const Tensor pre = fc1->bias.defined() ? linear_gelu(x, fc1->weight, fc1->bias) : gelu(fc1->forward(x));
  Tensor h = dropout(pre, drop_, is_training());
  return scope.output(dropout(fc2->forward(h), drop_, is_training()));
}

}  // namespace tessera::nn
