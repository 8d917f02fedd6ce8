#include "tessera/nn/probe.h"

#include "tessera/core/error.h"

namespace tessera::nn {

namespace {

Tensor kept(const Tensor& t) { return t.detach().to(Device::cpu()).to(DType::Float32); }

}  // namespace

void ProbeRecorder::exit(const Module& module, const std::vector<Tensor>& outputs) noexcept {
  if (outputs.empty() || !values_.count({&module, "input"})) return;
  try {
    auto& out = values_[{&module, "output"}];
    for (const Tensor& t : outputs) out.push_back(kept(t));
  } catch (...) {
    // Out of memory while unwinding or copying: the outputs are left out and value() reports them
    // missing; throwing here would end the process.
  }
}

void ProbeRecorder::probe(const Module& module, const std::string& name, const Tensor& value) {
  values_[{&module, name}].push_back(kept(value));
}

std::vector<Tensor> ProbeRecorder::values(const Module& module, const std::string& name) const {
  const auto it = values_.find({&module, name});
  return it == values_.end() ? std::vector<Tensor>{} : it->second;
}

Tensor ProbeRecorder::value(const Module& module, const std::string& name) const {
  const std::vector<Tensor> v = values(module, name);
  TS_CHECK(v.size() == 1, "probes: ", module.type_name(), " showed ", v.size(), " values named '", name,
           "' in the pass, expected one");
  return v.front();
}

}  // namespace tessera::nn
