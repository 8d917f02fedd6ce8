// The table's families by name, and which of them calls the kernel tables of the registry's
// families that have no op family of their own.
#include <algorithm>
#include <map>

#include "tests/op_samples/op_info.h"

namespace tessera::testing {

std::vector<OpInfo> family_ops(const std::string& family) {
  static const std::map<std::string, std::vector<OpInfo> (*)()> families{
      {"elementwise", elementwise_ops},
      {"reduce", reduce_ops},
      {"softmax", softmax_ops},
      {"loss", loss_ops},
      {"linalg", linalg_ops},
      {"conv", conv_ops},
      {"normalization", normalization_ops},
      {"indexing", indexing_ops},
      {"interpolate", interpolate_ops},
      {"fused", fused_ops},
      {"optim", optim_ops},
      {"views", view_ops},
  };
  const auto it = families.find(family);
  TS_CHECK(it != families.end(), "op samples: no family '", family, "'");
  std::vector<OpInfo> ops = it->second();
  TS_CHECK(!ops.empty(), "op samples: family '", family, "' has no ops");
  // A sample list, or a sample's input list, that comes out empty would make every check over it pass
  // without checking anything (as lists read from another translation unit's not yet initialised
  // globals once did): the table refuses it.
  for (OpInfo& op : ops) {
    TS_CHECK(family == op_decl(op.op).family, "op samples: ", op.name(), " is declared in family '",
             op_decl(op.op).family, "' (ops/op_list.h) but has samples in '", family, "'");
    op.samples = [family, name = op.name(), make = std::move(op.samples)] {
      std::vector<SampleInput> samples = make();
      TS_CHECK(!samples.empty(), "op samples: ", family, " op '", name, "' has no samples");
      for (const SampleInput& sample : samples)
        TS_CHECK(!sample.inputs.empty(), "op samples: ", family, " op '", name, "', sample '", sample.name,
                 "' has no inputs");
      return samples;
    };
  }
  return ops;
}

OpInfo variant_of(OpId op, std::string variant, std::function<std::vector<SampleInput>()> samples,
                  bool differentiable) {
  OpInfo info{op, std::move(samples), differentiable};
  info.variant = std::move(variant);
  return info;
}

namespace {

bool all_float32(const Inputs& inputs) {
  for (const Tensor& t : inputs)
    if (is_floating(t.dtype()) && t.dtype() != DType::Float32) return false;
  return true;
}

}  // namespace

int check_family_in_low_precision(const std::string& family, DType low, const std::vector<Device>& devices,
                                  bool reference_in_low) {
  int checked = 0;
  for (const OpInfo& op : family_ops(family))
    for (const SampleInput& sample : op.samples()) {
      if (!all_float32(sample.inputs)) continue;
      check_low_precision_on_devices(std::string(op.name()) + ": " + sample.name, sample.inputs, sample.call,
                                     {low, op.parameters, op.accumulate_result, reference_in_low}, sample.device,
                                     devices);
      ++checked;
    }
  return checked;
}

std::vector<OpInfo> all_op_samples() {
  std::vector<OpInfo> all;
  std::vector<std::string> families;
  for (const OpDecl& op : all_ops())
    if (std::find(families.begin(), families.end(), op.family) == families.end()) families.push_back(op.family);
  for (const std::string& family : families)
    for (OpInfo& op : family_ops(family)) all.push_back(std::move(op));
  return all;
}

std::string sample_family(const std::string& registry_family) {
  // copy and fill: cat, pad, split; random: dropout and drop_path; check_range: gather, index_select.
  // The ten fused ops are families of their own in the registry and share one file of samples.
  static const std::map<std::string, std::string> callers{
      {"copy", "indexing"},
      {"random", "elementwise"},
      {"checks", "indexing"},
      {"layer_scale_residual", "fused"},
      {"linear_gelu", "fused"},
      {"xca_attention_map", "fused"},
      {"xca_attention", "fused"},
      {"factor_attention", "fused"},
      {"factor_attention_merge", "fused"},
      {"class_attention", "fused"},
      {"xnorm_matmul", "fused"},
      {"talking_heads_attention", "fused"},
      {"depthwise_conv2d_gelu", "fused"},
  };
  const auto it = callers.find(registry_family);
  return it == callers.end() ? registry_family : it->second;
}

}  // namespace tessera::testing
