// ONNX out: a model's forward pass written as an ONNX graph (opset 17, float32, eval mode) through
// ONNX's own library (its protobuf schema and checker; Debian libonnx-dev), for the runtimes people
// deploy with (ONNX Runtime, TensorRT, OpenVINO).
//
// The graph is traced, not written by hand per model: the forward pass runs once on an example
// image with an op tracer installed (ops/trace.h), and every op that depends on the image becomes
// standard ONNX nodes — fused ops lower to their compositions (LayerNormalization, Softmax, MatMul,
// Conv with groups, GELU through Erf). What does not depend on the image (a positional encoding
// computed from the grid, a reshaped weight) is computed during the trace and stored as a constant.
// Parameters and buffers become initializers under the model's own names, timm's names.
//
// With a dynamic batch the batch dim is the symbol "batch": the trace follows where the batch
// dim of each value lies, writes reshapes with -1 there, and broadcasts a constant made for the
// example's batch (a class token expanded over it) from its first row.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/nn/module.h"

namespace tessera {

struct OnnxExportOptions {
  int64_t in_chans = 3;
  int64_t img_size = 224;
  bool dynamic_batch = false;  // false: batch 1
};

// Writes `model` (float32, on the CPU; put in eval mode for the trace and restored after) to `path`
// as an ONNX model with input "input" [batch, in_chans, img, img] and output "logits" (the forward
// pass's result), checked by ONNX's checker before it is written (atomically). Throws naming the op
// when the forward pass uses one the exporter cannot write.
void export_onnx(nn::Module& model, const std::string& path, const OnnxExportOptions& options = {});

}  // namespace tessera
