// The per-op ONNX lowerings, generated from the op list (ops/op_list.h): every op declared
// `Lowered` has a function lower_<op> that writes it as standard ONNX nodes, defined in
// io/onnx/lower_<family>.cpp (an op declared Lowered without one fails the link), and the exporter
// finds it by the traced op's id. Fused ops lower to their compositions.
#pragma once
#include "tessera/io/onnx/graph.h"
#include "tessera/ops/op_list.h"

namespace tessera::onnx_export {

using Lowering = void (*)(OnnxGraph& g, const TracedOp& op);

#define TS_LOWERING_Lowered(name) void lower_##name(OnnxGraph& g, const TracedOp& op);
#define TS_LOWERING_Refused(name)
#define TS_LOWERING_Untraced(name)
#define TS_DECLARE_LOWERING(name, family, trace) TS_LOWERING_##trace(name)
TESSERA_OPS(TS_DECLARE_LOWERING)
#undef TS_DECLARE_LOWERING

// The op's lowering, or null for an op that is not Lowered.
Lowering lowering_of(OpId op);

// Compositions several lowerings share.
// x / max(‖x‖₂ over `axis`, eps), as F.normalize.
std::string normalized(OnnxGraph& g, const std::string& x, int64_t axis, double eps);
// GELU: 0.5·x·(1 + erf(x/√2)), or its tanh form.
std::string gelu(OnnxGraph& g, const std::string& x, bool tanh_form);
// x·Wᵀ + b of a traced linear or linear_gelu (inputs x, weight, bias).
std::string linear(OnnxGraph& g, const TracedOp& op);
// The Conv node of a traced conv2d or depthwise_conv2d_gelu (inputs x, weight, bias; arguments
// stride, padding, dilation, groups).
std::string conv(OnnxGraph& g, const TracedOp& op);
// x with its last two dims swapped.
std::string last_two_swapped(OnnxGraph& g, const std::string& x, int64_t rank);

}  // namespace tessera::onnx_export
