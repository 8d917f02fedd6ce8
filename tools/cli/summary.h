// The teaching view of a model (`tessera inspect --summary`, as torchinfo's summary): its module
// tree in registration order, each module with the shape it returned, its parameters and the
// multiply-accumulates of its calls in one forward pass of one image. The rows come from the
// module tree; the shapes and counts from observing the pass (nn/module.h ForwardScope), so a
// module that the pass never called as a module (Mlp's fc1, fused into linear_gelu; LPI's conv1,
// into depthwise_conv2d_gelu) is listed with its parameters and no shape.
#pragma once
#include <string>
#include <vector>

#include "tessera/models/model.h"

namespace tessera::cli {

struct SummaryRow {
  std::string path;  // "blocks.0.attn"; "" for the model itself
  std::string name;  // the last part of the path ("attn"); the type for the model
  std::string type;  // "XCA"
  int depth = 0;     // 0 for the model
  // A module registered under an earlier path as well (CoaT's shared convolutional encodings): its
  // parameters are counted there; its calls through this path are counted here.
  bool shared = false;
  std::vector<Shape> output_shapes;  // of its last call; empty when the pass did not call it
  int64_t calls = 0;
  int64_t params = 0;      // in its subtree, each tensor once, at its first path
  int64_t own_params = 0;  // registered on this module itself (0 for a shared one)
  // Of all its calls, children's included; for a module never called itself (a ModuleList whose
  // owner calls the blocks in turn) the sum of its children's.
  int64_t macs = 0;
  int64_t self_macs = 0;  // of its calls minus the calls to other modules made within them
};

struct ModelSummary {
  Shape input_shape;
  std::vector<SummaryRow> rows;  // depth-first, the model first
  int64_t params = 0;            // Module::num_parameters()
  int64_t trainable_params = 0;  // those that require a gradient
  int64_t macs = 0;              // FlopCounter over the pass: the sum of every row's self_macs
};

// Runs one forward pass of `input` through `model` (without a graph) and observes it.
ModelSummary summarize(models::Model& model, const Tensor& input);

// 1234567 -> "1,234,567"
std::string grouped(int64_t v);
// A row's output shapes as the table prints them ("[1, 197, 384]", "--" for none).
std::string shapes_text(const std::vector<Shape>& shapes);

// The table: one row per module down to `max_depth` (0: all), indented by depth, then totals.
std::string summary_text(const ModelSummary& s, int max_depth);
// The same as a JSON object: input_shape, params, trainable_params, flops, modules [...].
std::string summary_json(const ModelSummary& s, const std::string& model_name);

}  // namespace tessera::cli
