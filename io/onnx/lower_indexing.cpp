// ONNX lowerings of cat, pad and interpolate (io/onnx/lowerings.h).
#include <algorithm>

#include "tessera/io/onnx/lowerings.h"
#include "tessera/ops/interpolate.h"

namespace tessera::onnx_export {

// A batch-dependent operand fixes the batch; constants made for the example's batch (a class
// token expanded over it) are written as one row and expanded to it.
void lower_cat(OnnxGraph& g, const TracedOp& op) {
  const int64_t d = op.arg<int64_t>("dim"), batch = g.batch_of(op);
  TS_CHECK(!(g.dynamic() && d == batch), "export: a cat along the batch dim cannot be written with a dynamic batch");
  std::string shape_of_batch;
  std::vector<std::string> in;
  for (const Tensor& t : op.inputs) {
    if (g.depends(t) || !g.dynamic() || batch < 0 || t.size(batch) != kTraceBatch) {
      in.push_back(g.input(t, false));
      continue;
    }
    if (shape_of_batch.empty()) {  // [batch, 1, 1, ...] from a batch-dependent operand's shape
      const Tensor& ref =
          *std::find_if(op.inputs.begin(), op.inputs.end(), [&](const Tensor& x) { return g.depends(x); });
      const std::string dims = g.apply("Shape", {g.value_of(ref, "an operand").name});
      const std::string b = g.apply("Slice", {dims, g.ints({batch}), g.ints({batch + 1})});
      std::vector<std::string> parts;
      for (int64_t k = 0; k < t.dim(); ++k) parts.push_back(k == batch ? b : g.ints({1}));
      shape_of_batch = g.apply("Concat", parts, {{"axis", int64_t{0}}});
    }
    TS_CHECK(OnnxGraph::rows_equal(t), "export: a constant operand of cat differs along the batch dim");
    in.push_back(g.apply("Expand", {g.input(t.narrow(batch, 0, 1), false), shape_of_batch}));
  }
  g.output(op, g.apply("Concat", in, {{"axis", d}}), batch);
}

void lower_pad(OnnxGraph& g, const TracedOp& op) {
  const auto& pads = op.arg<std::vector<int64_t>>("pads");
  const int64_t rank = op.inputs[0].dim();
  std::vector<int64_t> onnx_pads(static_cast<size_t>(2 * rank), 0);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const size_t d = static_cast<size_t>(rank) - 1 - k;
    onnx_pads[d] = pads[2 * k];
    onnx_pads[d + static_cast<size_t>(rank)] = pads[2 * k + 1];
  }
  g.output(op, g.apply("Pad", {g.input(op.inputs[0]), g.ints(onnx_pads), g.scalar(op.arg<double>("value"))}));
}

// F.interpolate(align_corners=False) is Resize with PyTorch's half-pixel coordinates; bicubic with
// its a = -0.75. The output's N and C come from the input's shape, so a dynamic batch passes.
void lower_interpolate(OnnxGraph& g, const TracedOp& op) {
  const std::string x = g.input(op.inputs[0]);
  const std::string leading = g.apply("Slice", {g.apply("Shape", {x}), g.ints({0}), g.ints({2})});
  const std::string sizes =
      g.apply("Concat", {leading, g.ints({op.outputs[0].size(2), op.outputs[0].size(3)})}, {{"axis", int64_t{0}}});
  const bool cubic = op.arg<int64_t>("mode") == static_cast<int64_t>(InterpolationMode::Bicubic);
  OnnxGraph::Attrs attrs{{"mode", std::string(cubic ? "cubic" : "linear")},
                         {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}};
  if (cubic) attrs.push_back({"cubic_coeff_a", -0.75f});
  g.output(op, g.apply("Resize", {x, "", "", sizes}, attrs));
}

}  // namespace tessera::onnx_export
