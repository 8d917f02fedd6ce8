// Recording what the modules of one forward pass show (ForwardScope::probe, nn/module.h): the
// attention maps and block inputs that `tessera explain` and `tessera attention-map` draw.
//   nn::ProbeRecorder probes;
//   { nn::ObserveForward observe(probes); model.forward(x); }
//   Tensor a = probes.value(*block->attn, "attention");
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tessera/nn/module.h"

namespace tessera::nn {

class ProbeRecorder : public ForwardObserver {
 public:
  bool wants_probes() const override { return true; }
  void enter(const Module& /*module*/) override {}
  // A module that showed an "input" has what it returned kept as its "output" (one per tensor).
  void exit(const Module& module, const std::vector<Tensor>& outputs) noexcept override;
  // Kept detached, as float32 on the CPU.
  void probe(const Module& module, const std::string& name, const Tensor& value) override;

  // What `module` showed under `name`, in the order of the pass; empty when it showed nothing.
  std::vector<Tensor> values(const Module& module, const std::string& name) const;
  // The one value `module` showed under `name`; an error naming the module's type and `name`
  // when it showed none or several.
  Tensor value(const Module& module, const std::string& name) const;

 private:
  std::map<std::pair<const Module*, std::string>, std::vector<Tensor>> values_;
};

}  // namespace tessera::nn
