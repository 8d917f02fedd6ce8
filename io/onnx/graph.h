// The ONNX graph an export writes, as the per-op lowerings (io/onnx/lowerings.h) see it: values by
// the tensors they come from, constants written as initializers, and nodes. The lowerings include
// only this header; ONNX's protobuf types stay in io/onnx/graph.cpp and io/onnx_export.cpp.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/ops/trace.h"

namespace onnx {
class GraphProto;
}

namespace tessera::onnx_export {

// The example's batch under --dynamic-batch: 7 is no other dim's size.
inline constexpr int64_t kTraceBatch = 7;

// A value of the graph: its ONNX name and, for values that depend on the image, which dim is the
// batch (-1: none).
struct GraphValue {
  std::string name;
  int64_t batch_dim = -1;
};

class OnnxGraph {
 public:
  using Attrs = std::vector<std::pair<std::string, std::variant<int64_t, float, std::vector<int64_t>, std::string>>>;

  // `graph` is written into; `names` names parameters and buffers (timm's names).
  OnnxGraph(onnx::GraphProto* graph, std::unordered_map<const TensorImpl*, std::string> names, bool dynamic_batch)
      : graph_(graph), names_(std::move(names)), dynamic_(dynamic_batch) {}

  bool dynamic() const { return dynamic_; }

  // ---- values and constants
  // `t` is the graph value `v` from now on.
  void bind(const Tensor& t, GraphValue v);
  bool depends(const Tensor& t) const { return t.defined() && values_.count(&t.impl()) > 0; }
  const GraphValue& value_of(const Tensor& t, const char* what) const;
  // The name of an op's input: a value of the graph, or a constant written as an initializer (a
  // parameter under its own name). A constant made for the example's batch and used beside
  // batch-dependent values is written as its first row when every row is the same, to broadcast.
  std::string input(const Tensor& t, bool shrink_batch = true);
  // Constants written as initializers, under fresh names.
  std::string ints(const std::vector<int64_t>& v);
  std::string scalar(double v);
  std::string constant(const Tensor& t);
  // Whether every row of `t` along dim 0 is the same.
  static bool rows_equal(const Tensor& t);

  // ---- nodes
  void node(const char* type, const std::vector<std::string>& in, const std::vector<std::string>& out,
            const Attrs& attrs = {});
  // One node with one output, returned.
  std::string apply(const char* type, const std::vector<std::string>& in, const Attrs& attrs = {});

  // The batch dim of an op's output, from its first batch-dependent input (same rank: elementwise,
  // norms, fused ops keep it).
  int64_t batch_of(const TracedOp& op) const;
  // The op's output is the value `name`, its batch dim where the op's inputs have it, or at `batch_dim`.
  void output(const TracedOp& op, const std::string& name) { output(op, name, batch_of(op)); }
  void output(const TracedOp& op, const std::string& name, int64_t batch_dim) {
    bind(op.outputs.at(0), {name, batch_dim});
  }
  // A target shape for Reshape/Expand: under a dynamic batch, -1 (reshape) at the batch dim.
  std::string reshape_target(const Shape& shape, int64_t batch_dim);

 private:
  std::string fresh_constant_name() { return "const_" + std::to_string(constants_++); }
  void write_initializer(const std::string& name, const Tensor& t);

  onnx::GraphProto* graph_;
  std::unordered_map<const TensorImpl*, std::string> names_;  // parameters and buffers
  bool dynamic_;
  std::unordered_map<const TensorImpl*, GraphValue> values_;
  std::set<std::string> written_;  // initializers
  std::map<std::pair<const TensorImpl*, bool>, std::string> constant_names_;
  std::vector<Tensor> kept_;  // alive for the export, so no other tensor reuses an address
  int64_t next_value_ = 0, constants_ = 0;
};

}  // namespace tessera::onnx_export
