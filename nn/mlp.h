// timm's Mlp: fc1 -> GELU (exact) -> dropout -> fc2 -> dropout. Names mlp.fc1.*, mlp.fc2.*.
#pragma once
#include "tessera/nn/layers.h"

namespace tessera::nn {

class Mlp : public Module {
 public:
  Mlp(int64_t dim, int64_t hidden, double drop = 0.0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Mlp"; }
  std::shared_ptr<Linear> fc1, fc2;

 private:
  double drop_;
};

// Both layers initialised as ViT Linears (trunc_normal .02, bias 0).
void init_trunc_normal(Mlp& mlp, double std = 0.02);

}  // namespace tessera::nn
