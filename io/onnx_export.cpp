// The ONNX exporter: an OpTracer that turns each traced op of a forward pass into ONNX nodes
// (io/onnx_export.h says what and why).
#include "tessera/io/onnx_export.h"

#ifdef TESSERA_ONNX  // CMake's TESSERA_ONNX: the exporter, or (below) a build without it
// How Debian's ONNX was built (its CMake package says so to its users): the ONNX-ML schema, in
// namespace onnx.
#define ONNX_NAMESPACE onnx
#define ONNX_ML 1
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <variant>

#include "tessera/core/atomic_file.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

constexpr int64_t kOpset = 17;
constexpr int64_t kTraceBatch = 7;  // the example's batch under --dynamic-batch: 7 is no other dim's size

// A value of the graph: its ONNX name and, for values that depend on the image, which dim is the
// batch (-1: none).
struct GraphValue {
  std::string name;
  int64_t batch_dim = -1;
};

class Exporter final : public OpTracer {
 public:
  Exporter(const nn::Module& model, bool dynamic_batch) : dynamic_(dynamic_batch) {
    for (const auto& [name, t] : model.named_parameters()) names_.emplace(&t.impl(), name);
    for (const auto& [name, t] : model.named_buffers()) names_.emplace(&t.impl(), name);
    model_.set_ir_version(onnx::IR_VERSION_2019_3_18 + 2);  // IR 8, what opset 17 goes with
    model_.set_producer_name("tessera");
    onnx::OperatorSetIdProto* opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(kOpset);
    graph_ = model_.mutable_graph();
    graph_->set_name(model.type_name());
  }

  void add_input(const Tensor& x) {
    bind(x, {"input", 0});
    describe_io(graph_->add_input(), "input", x.shape());
  }

  void add_output(const Tensor& y) {
    const GraphValue& v = value_of(y, "the model's output");
    node("Identity", {v.name}, {"logits"});
    describe_io(graph_->add_output(), "logits", y.shape());
  }

  onnx::ModelProto& model() { return model_; }

  void record(const TracedOp& op) override {
    // An op that does not depend on the image is part of a constant: nothing to write.
    bool depends = false;
    for (const Tensor& t : op.inputs) depends = depends || (t.defined() && values_.count(&t.impl()) > 0);
    if (!depends) return;
    lower(op);
  }

 private:
  // ---- values and constants
  void bind(const Tensor& t, GraphValue v) {
    kept_.push_back(t);  // alive for the export, so no other tensor reuses its address
    values_[&t.impl()] = std::move(v);
  }
  bool depends(const Tensor& t) const { return t.defined() && values_.count(&t.impl()) > 0; }

  const GraphValue& value_of(const Tensor& t, const char* what) const {
    const auto it = values_.find(&t.impl());
    TS_CHECK(it != values_.end(), "export: ", what, " does not come from the traced forward pass (internal error)");
    return it->second;
  }

  // The name of an op's input: a value of the graph, or a constant written as an initializer (a
  // parameter under its own name). A constant made for the example's batch and used beside
  // batch-dependent values is written as its first row when every row is the same, to broadcast.
  std::string input(const Tensor& t, bool shrink_batch = true) {
    if (depends(t)) return value_of(t, "an input").name;
    const auto known = constant_names_.find({&t.impl(), shrink_batch});
    if (known != constant_names_.end()) return known->second;
    kept_.push_back(t);
    std::string& remembered = constant_names_[{&t.impl(), shrink_batch}];
    Tensor c = t.detach();
    if (dynamic_ && shrink_batch && c.dim() > 0 && c.size(0) == kTraceBatch && rows_equal(c)) c = c.narrow(0, 0, 1);
    const auto named = names_.find(&t.impl());
    remembered =
        named != names_.end() && c.shape() == t.shape() ? named->second : "const_" + std::to_string(constants_++);
    if (written_.insert(remembered).second) write_tensor(graph_->add_initializer(), remembered, c);
    return remembered;
  }

  static bool rows_equal(const Tensor& t) {
    const Tensor first = t.narrow(0, 0, 1).expand(t.shape());
    return eq(first, t).to(DType::Float32).sum().item() == static_cast<double>(t.numel());
  }

  static void write_tensor(onnx::TensorProto* proto, const std::string& name, const Tensor& t) {
    proto->set_name(name);
    for (int64_t s : t.shape()) proto->add_dims(s);
    if (t.dtype() == DType::Int64) {
      proto->set_data_type(onnx::TensorProto::INT64);
      const Tensor c = t.contiguous();
      proto->set_raw_data(c.raw_data(), static_cast<size_t>(c.numel()) * sizeof(int64_t));
      return;
    }
    TS_CHECK(is_floating(t.dtype()), "export: a constant of dtype ", dtype_name(t.dtype()),
             " cannot be written (float32 and int64 can)");
    proto->set_data_type(onnx::TensorProto::FLOAT);
    const Tensor c = t.to(DType::Float32).contiguous();
    proto->set_raw_data(c.raw_data(), static_cast<size_t>(c.numel()) * sizeof(float));
  }

  std::string ints(const std::vector<int64_t>& v) {
    std::string name = "const_" + std::to_string(constants_++);
    Tensor t = from_vector(v, {static_cast<int64_t>(v.size())});
    write_tensor(graph_->add_initializer(), name, t);
    return name;
  }
  std::string scalar(double v) {
    std::string name = "const_" + std::to_string(constants_++);
    write_tensor(graph_->add_initializer(), name, from_vector(std::vector<float>{static_cast<float>(v)}, {}));
    return name;
  }

  void describe_io(onnx::ValueInfoProto* info, const std::string& name, const Shape& shape) {
    info->set_name(name);
    auto* type = info->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    for (size_t i = 0; i < shape.size(); ++i) {
      auto* d = type->mutable_shape()->add_dim();
      if (i == 0 && dynamic_) d->set_dim_param("batch");
      else d->set_dim_value(shape[i]);
    }
  }

  // ---- nodes
  std::string fresh() { return "v" + std::to_string(next_value_++); }

  using Attrs = std::vector<std::pair<std::string, std::variant<int64_t, float, std::vector<int64_t>, std::string>>>;
  void node(const char* type, const std::vector<std::string>& in, const std::vector<std::string>& out,
            const Attrs& attrs = {}) {
    onnx::NodeProto* n = graph_->add_node();
    n->set_op_type(type);
    n->set_name(std::string(type) + "_" + std::to_string(graph_->node_size()));
    for (const std::string& s : in) n->add_input(s);
    for (const std::string& s : out) n->add_output(s);
    for (const auto& [key, value] : attrs) {
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name(key);
      if (const auto* i = std::get_if<int64_t>(&value)) {
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(*i);
      } else if (const auto* f = std::get_if<float>(&value)) {
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(*f);
      } else if (const auto* text = std::get_if<std::string>(&value)) {
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s(*text);
      } else {
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : std::get<std::vector<int64_t>>(value)) a->add_ints(v);
      }
    }
  }
  // One node with one output, returned.
  std::string apply(const char* type, const std::vector<std::string>& in, const Attrs& attrs = {}) {
    std::string out = fresh();
    node(type, in, {out}, attrs);
    return out;
  }

  // The batch dim of an op's output, from its first batch-dependent input (same rank: elementwise,
  // norms, fused ops keep it).
  int64_t batch_of(const TracedOp& op) const {
    for (const Tensor& t : op.inputs)
      if (depends(t)) return value_of(t, "an input").batch_dim;
    return -1;
  }

  void output(const TracedOp& op, const std::string& name, int64_t batch_dim) {
    bind(op.outputs.at(0), {name, batch_dim});
  }

  // A target shape for Reshape/Expand: under a dynamic batch, -1 (reshape) or the input's batch
  // (expand, from Shape) at the batch dim.
  std::string reshape_target(const Shape& shape, int64_t batch_dim) {
    std::vector<int64_t> v(shape.begin(), shape.end());
    if (dynamic_ && batch_dim >= 0) v[static_cast<size_t>(batch_dim)] = -1;
    return ints(v);
  }

  // x / max(‖x‖₂ over `axis`, eps), as F.normalize.
  std::string normalized(const std::string& x, int64_t axis, double eps) {
    const std::string norm = apply("ReduceL2", {x}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}});
    return apply("Div", {x, apply("Max", {norm, scalar(eps)})});
  }

  std::string gelu(const std::string& x, bool tanh_form) {
    if (tanh_form) {  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
      const std::string cube = apply("Mul", {x, apply("Mul", {x, x})});
      const std::string inner =
          apply("Mul", {apply("Add", {x, apply("Mul", {cube, scalar(0.044715)})}), scalar(std::sqrt(2.0 / M_PI))});
      return apply("Mul", {apply("Mul", {x, scalar(0.5)}), apply("Add", {apply("Tanh", {inner}), scalar(1.0)})});
    }
    // 0.5·x·(1 + erf(x/√2))
    const std::string e = apply("Erf", {apply("Div", {x, scalar(std::sqrt(2.0))})});
    return apply("Mul", {apply("Mul", {x, scalar(0.5)}), apply("Add", {e, scalar(1.0)})});
  }

  std::string linear(const TracedOp& op) {
    const std::string wt = apply("Transpose", {input(op.inputs[1])}, {{"perm", std::vector<int64_t>{1, 0}}});
    std::string y = apply("MatMul", {input(op.inputs[0]), wt});
    if (op.inputs[2].defined()) y = apply("Add", {y, input(op.inputs[2])});
    return y;
  }

  std::string last_two_swapped(const std::string& x, int64_t rank) {
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
    std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
    return apply("Transpose", {x}, {{"perm", perm}});
  }

  void lower(const TracedOp& op) {
    const std::string name = op.name;
    const int64_t batch = batch_of(op);
    static const std::map<std::string, const char*> binaries{{"add", "Add"},    {"sub", "Sub"}, {"mul", "Mul"},
                                                             {"div", "Div"},    {"pow", "Pow"}, {"maximum", "Max"},
                                                             {"minimum", "Min"}};
    static const std::map<std::string, const char*> unaries{
        {"neg", "Neg"}, {"exp", "Exp"}, {"log", "Log"}, {"sqrt", "Sqrt"},       {"abs", "Abs"},  {"tanh", "Tanh"},
        {"erf", "Erf"}, {"sin", "Sin"}, {"cos", "Cos"}, {"sigmoid", "Sigmoid"}, {"relu", "Relu"}};
    if (const auto b = binaries.find(name); b != binaries.end()) {
      output(op, apply(b->second, {input(op.inputs[0]), input(op.inputs[1])}), batch);
    } else if (const auto u = unaries.find(name); u != unaries.end()) {
      output(op, apply(u->second, {input(op.inputs[0])}), batch);
    } else if (name == "rsqrt") {
      output(op, apply("Reciprocal", {apply("Sqrt", {input(op.inputs[0])})}), batch);
    } else if (name == "silu") {
      const std::string x = input(op.inputs[0]);
      output(op, apply("Mul", {x, apply("Sigmoid", {x})}), batch);
    } else if (name == "gelu") {
      output(op, gelu(input(op.inputs[0]), op.arg<int64_t>("tanh") != 0), batch);
    } else if (name == "clamp") {
      output(op, apply("Clip", {input(op.inputs[0]), scalar(op.arg<double>("a")), scalar(op.arg<double>("b"))}), batch);
    } else if (name == "where") {
      output(op, apply("Where", {input(op.inputs[0]), input(op.inputs[1]), input(op.inputs[2])}), batch);
    } else if (name == "clone" || (name == "to" && op.outputs[0].dtype() == op.inputs[0].dtype())) {
      output(op, apply("Identity", {input(op.inputs[0])}), batch);
    } else if (name == "to") {
      TS_CHECK(is_floating(op.outputs[0].dtype()), "export: a cast to ", dtype_name(op.outputs[0].dtype()),
               " cannot be written");
      output(op, apply("Identity", {input(op.inputs[0])}), batch);  // the graph is float32 throughout
    } else if (name == "reshape") {
      lower_reshape(op, batch);
    } else if (name == "permute") {
      const auto& dims = op.arg<std::vector<int64_t>>("dims");
      int64_t moved = -1;
      for (size_t i = 0; i < dims.size(); ++i)
        if (dims[i] == batch) moved = static_cast<int64_t>(i);
      output(op, apply("Transpose", {input(op.inputs[0])}, {{"perm", dims}}), moved);
    } else if (name == "slice") {
      const int64_t d = op.arg<int64_t>("dim");
      TS_CHECK(!(dynamic_ && d == batch), "export: a slice of the batch dim cannot be written with a dynamic batch");
      output(op,
             apply("Slice", {input(op.inputs[0]), ints({op.arg<int64_t>("start")}), ints({op.arg<int64_t>("end")}),
                             ints({d}), ints({op.arg<int64_t>("step")})}),
             batch);
    } else if (name == "select") {
      const int64_t d = op.arg<int64_t>("dim");
      TS_CHECK(!(dynamic_ && d == batch), "export: a select from the batch dim cannot be written with a dynamic batch");
      const std::string index = "const_" + std::to_string(constants_++);
      write_tensor(graph_->add_initializer(), index, from_vector(std::vector<int64_t>{op.arg<int64_t>("index")}, {}));
      output(op, apply("Gather", {input(op.inputs[0]), index}, {{"axis", d}}), batch > d ? batch - 1 : batch);
    } else if (name == "expand") {
      lower_expand(op, batch);
    } else if (name == "matmul") {
      output(op, apply("MatMul", {input(op.inputs[0]), input(op.inputs[1])}), batch);
    } else if (name == "linear") {
      output(op, linear(op), batch);
    } else if (name == "linear_gelu") {
      output(op, gelu(linear(op), op.arg<int64_t>("tanh") != 0), batch);
    } else if (name == "conv2d") {
      std::vector<std::string> in{input(op.inputs[0]), input(op.inputs[1])};
      if (op.inputs[2].defined()) in.push_back(input(op.inputs[2]));
      const auto& pad = op.arg<std::vector<int64_t>>("padding");
      output(op,
             apply("Conv", in,
                   {{"strides", op.arg<std::vector<int64_t>>("stride")},
                    {"pads", std::vector<int64_t>{pad[0], pad[1], pad[0], pad[1]}},
                    {"dilations", op.arg<std::vector<int64_t>>("dilation")},
                    {"group", op.arg<int64_t>("groups")},
                    {"kernel_shape", std::vector<int64_t>{op.inputs[1].size(2), op.inputs[1].size(3)}}}),
             batch);
    } else if (name == "layer_norm") {
      const int64_t c = op.inputs[0].shape().back();
      const std::string w = op.inputs[1].defined() ? input(op.inputs[1]) : input(ones({c}));
      const std::string b = op.inputs[2].defined() ? input(op.inputs[2]) : input(zeros({c}));
      output(op,
             apply("LayerNormalization", {input(op.inputs[0]), w, b},
                   {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(op.arg<double>("eps"))}}),
             batch);
    } else if (name == "batch_norm") {
      TS_CHECK(op.arg<int64_t>("training") == 0, "export: batch_norm in training mode (the model is in eval mode)");
      const int64_t c = op.inputs[0].size(1);
      const std::string w = op.inputs[3].defined() ? input(op.inputs[3]) : input(ones({c}));
      const std::string b = op.inputs[4].defined() ? input(op.inputs[4]) : input(zeros({c}));
      output(op,
             apply("BatchNormalization", {input(op.inputs[0]), w, b, input(op.inputs[1]), input(op.inputs[2])},
                   {{"epsilon", static_cast<float>(op.arg<double>("eps"))}}),
             batch);
    } else if (name == "softmax" || name == "log_softmax") {
      output(op,
             apply(name == "softmax" ? "Softmax" : "LogSoftmax", {input(op.inputs[0])},
                   {{"axis", op.arg<int64_t>("dim")}}),
             batch);
    } else if (name == "normalize") {
      output(op, normalized(input(op.inputs[0]), op.arg<int64_t>("dim"), op.arg<double>("eps")), batch);
    } else if (name == "sum") {
      const bool keep = op.arg<int64_t>("keepdim") != 0;
      const auto& dims = op.arg<std::vector<int64_t>>("dims");
      int64_t moved = batch;
      for (int64_t d : dims) {
        TS_CHECK(!(dynamic_ && d == batch), "export: a sum over the batch dim cannot be written with a dynamic batch");
        if (!keep && d < batch) --moved;
      }
      output(op, apply("ReduceSum", {input(op.inputs[0]), ints(dims)}, {{"keepdims", int64_t{keep}}}), moved);
    } else if (name == "cat") {
      lower_cat(op, batch);
    } else if (name == "pad") {
      const auto& pads = op.arg<std::vector<int64_t>>("pads");
      const int64_t rank = op.inputs[0].dim();
      std::vector<int64_t> onnx_pads(static_cast<size_t>(2 * rank), 0);
      for (size_t k = 0; k < pads.size() / 2; ++k) {
        const size_t d = static_cast<size_t>(rank) - 1 - k;
        onnx_pads[d] = pads[2 * k];
        onnx_pads[d + static_cast<size_t>(rank)] = pads[2 * k + 1];
      }
      output(op, apply("Pad", {input(op.inputs[0]), ints(onnx_pads), scalar(op.arg<double>("value"))}), batch);
    } else if (name == "layer_scale_residual") {
      TS_CHECK(!op.inputs[3].defined(), "export: stochastic depth's sample scale (the model is in eval mode)");
      output(op, apply("Add", {input(op.inputs[0]), apply("Mul", {input(op.inputs[2]), input(op.inputs[1])})}), batch);
    } else if (name == "xca_attention_map") {  // softmax(temperature · q̂·k̂ᵀ), q̂, k̂ normalised over the tokens
      const double eps = op.arg<double>("eps");
      const std::string q = normalized(input(op.inputs[0]), -1, eps), k = normalized(input(op.inputs[1]), -1, eps);
      const std::string logits = apply("Mul", {apply("MatMul", {q, last_two_swapped(k, 4)}), input(op.inputs[2])});
      output(op, apply("Softmax", {logits}, {{"axis", int64_t{-1}}}), batch);
    } else if (name == "class_attention") {  // softmax(scale·q·kᵀ)·v
      const std::string scores =
          apply("Mul", {apply("MatMul", {input(op.inputs[0]), last_two_swapped(input(op.inputs[1]), 4)}),
                        scalar(op.arg<double>("scale"))});
      output(op, apply("MatMul", {apply("Softmax", {scores}, {{"axis", int64_t{-1}}}), input(op.inputs[2])}), batch);
    } else if (name == "xnorm_matmul") {  // (gamma · normalize(q, -1)) · ctx
      const std::string q = normalized(input(op.inputs[0]), -1, op.arg<double>("eps"));
      output(op, apply("MatMul", {apply("Mul", {q, input(op.inputs[2])}), input(op.inputs[1])}), batch);
    } else if (name == "factor_attention_merge") {
      lower_factor_attention_merge(op, batch);
    } else if (name == "interpolate") {
      lower_interpolate(op, batch);
    } else {
      throw Error(detail::concat("export: the op '", name, "' has no ONNX form in Tessera's exporter yet"));
    }
  }

  void lower_reshape(const TracedOp& op, int64_t batch) {
    const Shape& in = op.inputs[0].shape();
    const Shape& out = op.outputs[0].shape();
    int64_t moved = -1;
    if (batch >= 0) {  // where the batch dim lands: the dim whose leading elements match
      int64_t before = 1;
      for (int64_t d = 0; d < batch; ++d) before *= in[static_cast<size_t>(d)];
      int64_t acc = 1;
      for (size_t j = 0; j < out.size(); ++j) {
        if (acc == before && out[j] == in[static_cast<size_t>(batch)]) {
          moved = static_cast<int64_t>(j);
          break;
        }
        acc *= out[j];
      }
      TS_CHECK(moved >= 0 || !dynamic_, "export: a reshape of ", in, " to ", out,
               " merges the batch dim with another, which a dynamic batch cannot follow");
    }
    output(op, apply("Reshape", {input(op.inputs[0]), reshape_target(out, moved)}), moved);
  }

  void lower_expand(const TracedOp& op, int64_t batch) {
    const Shape& out = op.outputs[0].shape();
    const int64_t lead = op.outputs[0].dim() - op.inputs[0].dim();
    const int64_t moved = batch >= 0 ? batch + lead : -1;
    std::vector<int64_t> target(out.begin(), out.end());
    if (dynamic_ && moved >= 0) target[static_cast<size_t>(moved)] = 1;  // Expand broadcasts: 1 keeps the batch
    output(op, apply("Expand", {input(op.inputs[0]), ints(target)}), moved);
  }

  // A batch-dependent operand fixes the batch; constants made for the example's batch (a class
  // token expanded over it) are written as one row and expanded to it.
  void lower_cat(const TracedOp& op, int64_t batch) {
    const int64_t d = op.arg<int64_t>("dim");
    TS_CHECK(!(dynamic_ && d == batch), "export: a cat along the batch dim cannot be written with a dynamic batch");
    std::string shape_of_batch;
    std::vector<std::string> in;
    for (const Tensor& t : op.inputs) {
      if (depends(t) || !dynamic_ || batch < 0 || t.size(batch) != kTraceBatch) {
        in.push_back(input(t, false));
        continue;
      }
      if (shape_of_batch.empty()) {  // [batch, 1, 1, ...] from a batch-dependent operand's shape
        const Tensor& ref =
            *std::find_if(op.inputs.begin(), op.inputs.end(), [&](const Tensor& x) { return depends(x); });
        const std::string dims = apply("Shape", {value_of(ref, "an operand").name});
        const std::string b = apply("Slice", {dims, ints({batch}), ints({batch + 1})});
        std::vector<std::string> parts;
        for (int64_t k = 0; k < t.dim(); ++k) parts.push_back(k == batch ? b : ints({1}));
        shape_of_batch = apply("Concat", parts, {{"axis", int64_t{0}}});
      }
      TS_CHECK(rows_equal(t), "export: a constant operand of cat differs along the batch dim");
      in.push_back(apply("Expand", {input(t.narrow(batch, 0, 1), false), shape_of_batch}));
    }
    output(op, apply("Concat", in, {{"axis", d}}), batch);
  }

  // F.interpolate(align_corners=False) is Resize with PyTorch's half-pixel coordinates; bicubic with
  // its a = -0.75. The output's N and C come from the input's shape, so a dynamic batch passes.
  void lower_interpolate(const TracedOp& op, int64_t batch) {
    const std::string x = input(op.inputs[0]);
    const std::string leading = apply("Slice", {apply("Shape", {x}), ints({0}), ints({2})});
    const std::string sizes =
        apply("Concat", {leading, ints({op.outputs[0].size(2), op.outputs[0].size(3)})}, {{"axis", int64_t{0}}});
    const bool cubic = op.arg<int64_t>("mode") == static_cast<int64_t>(InterpolationMode::Bicubic);
    Attrs attrs{{"mode", std::string(cubic ? "cubic" : "linear")},
                {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}};
    if (cubic) attrs.push_back({"cubic_coeff_a", -0.75f});
    output(op, apply("Resize", {x, "", "", sizes}, attrs), batch);
  }

  // y[b, n, h·d + c] = scale·m[b, h, n, c] + (n ≥ 1 ? q[b, h, n, c]·cv[b, h, n−1, c] : 0)
  void lower_factor_attention_merge(const TracedOp& op, int64_t batch) {
    const Tensor& m = op.inputs[0];
    const std::string q_img = apply("Slice", {input(op.inputs[1]), ints({1}), ints({m.size(2)}), ints({2})});
    const std::string ev = apply("Mul", {q_img, input(op.inputs[2])});
    const std::string padded = apply("Pad", {ev, ints({0, 0, 1, 0, 0, 0, 0, 0}), scalar(0.0)});
    const std::string sum = apply("Add", {apply("Mul", {input(m), scalar(op.arg<double>("scale"))}), padded});
    const std::string tokens = apply("Transpose", {sum}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    output(op, apply("Reshape", {tokens, reshape_target(op.outputs[0].shape(), batch >= 0 ? 0 : -1)}),
           batch >= 0 ? 0 : -1);
  }

  bool dynamic_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::unordered_map<const TensorImpl*, GraphValue> values_;
  std::unordered_map<const TensorImpl*, std::string> names_;  // parameters and buffers
  std::set<std::string> written_;                             // initializers
  std::map<std::pair<const TensorImpl*, bool>, std::string> constant_names_;
  std::vector<Tensor> kept_;
  int64_t next_value_ = 0, constants_ = 0;
};

}  // namespace

void export_onnx(nn::Module& model, const std::string& path, const OnnxExportOptions& options) {
  const int64_t img = options.img_size;
  for (const auto& [name, p] : model.named_parameters())
    TS_CHECK(p.device().is_cpu() && p.dtype() == DType::Float32, "export: parameter '", name, "' is ", describe(p),
             "; the exporter writes a float32 model from the CPU");
  const bool was_training = model.is_training();
  model.eval();
  Exporter exporter(model, options.dynamic_batch);
  Generator gen(0);
  const Tensor x = randn({options.dynamic_batch ? kTraceBatch : 1, options.in_chans, img, img}, DType::Float32, &gen);
  exporter.add_input(x);
  Tensor logits;
  {
    NoGradGuard no_grad;
    OpTracer* previous = OpTracer::install(&exporter);
    try {
      logits = model.forward(x);
    } catch (...) {
      OpTracer::install(previous);
      model.train(was_training);
      throw;
    }
    OpTracer::install(previous);
  }
  model.train(was_training);
  exporter.add_output(logits);
  try {
    onnx::checker::check_model(exporter.model());
  } catch (const std::exception& e) {
    throw Error(detail::concat("export: ONNX's checker refused the graph (internal error): ", e.what()));
  }
  std::string bytes;
  TS_CHECK(exporter.model().SerializeToString(&bytes), "export: the model could not be serialised (over 2 GB?)");
  AtomicFileWriter file(path, "export");
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace tessera

#else

#include "tessera/core/error.h"

namespace tessera {

void export_onnx(nn::Module&, const std::string& path, const OnnxExportOptions&) {
  throw Error(
      detail::concat("export: this build of Tessera has no ONNX exporter (configured with -DTESSERA_ONNX=OFF); ", path,
                     " was not written"));
}

}  // namespace tessera

#endif
