// The ONNX graph of an export (io/onnx/graph.h): values, constants and nodes as protobuf.
#include "tessera/io/onnx/graph.h"

// How Debian's ONNX was built (its CMake package says so to its users): the ONNX-ML schema, in
// namespace onnx.
#define ONNX_NAMESPACE onnx
#define ONNX_ML 1
#include <onnx/onnx_pb.h>

#include "tessera/ops/ops.h"

namespace tessera::onnx_export {

namespace {

void write_tensor(onnx::TensorProto* proto, const std::string& name, const Tensor& t) {
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

}  // namespace

void OnnxGraph::bind(const Tensor& t, GraphValue v) {
  kept_.push_back(t);
  values_[&t.impl()] = std::move(v);
}

const GraphValue& OnnxGraph::value_of(const Tensor& t, const char* what) const {
  const auto it = values_.find(&t.impl());
  TS_CHECK(it != values_.end(), "export: ", what, " does not come from the traced forward pass (internal error)");
  return it->second;
}

std::string OnnxGraph::input(const Tensor& t, bool shrink_batch) {
  if (depends(t)) return value_of(t, "an input").name;
  const auto known = constant_names_.find({&t.impl(), shrink_batch});
  if (known != constant_names_.end()) return known->second;
  kept_.push_back(t);
  std::string& remembered = constant_names_[{&t.impl(), shrink_batch}];
  Tensor c = t.detach();
  if (dynamic_ && shrink_batch && c.dim() > 0 && c.size(0) == kTraceBatch && rows_equal(c)) c = c.narrow(0, 0, 1);
  const auto named = names_.find(&t.impl());
  remembered = named != names_.end() && c.shape() == t.shape() ? named->second : fresh_constant_name();
  if (written_.insert(remembered).second) write_initializer(remembered, c);
  return remembered;
}

bool OnnxGraph::rows_equal(const Tensor& t) {
  const Tensor first = t.narrow(0, 0, 1).expand(t.shape());
  return eq(first, t).to(DType::Float32).sum().item() == static_cast<double>(t.numel());
}

void OnnxGraph::write_initializer(const std::string& name, const Tensor& t) {
  write_tensor(graph_->add_initializer(), name, t);
}

std::string OnnxGraph::constant(const Tensor& t) {
  std::string name = fresh_constant_name();
  write_initializer(name, t);
  return name;
}

std::string OnnxGraph::ints(const std::vector<int64_t>& v) {
  return constant(from_vector(v, {static_cast<int64_t>(v.size())}));
}

std::string OnnxGraph::scalar(double v) { return constant(from_vector(std::vector<float>{static_cast<float>(v)}, {})); }

void OnnxGraph::node(const char* type, const std::vector<std::string>& in, const std::vector<std::string>& out,
                     const Attrs& attrs) {
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

std::string OnnxGraph::apply(const char* type, const std::vector<std::string>& in, const Attrs& attrs) {
  // GCC 12 at -O3: a false -Wrestrict overlap inside std::string's insert when a literal is
  // prepended to a temporary string (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
  std::string out = "v" + std::to_string(next_value_++);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  node(type, in, {out}, attrs);
  return out;
}

int64_t OnnxGraph::batch_of(const TracedOp& op) const {
  for (const Tensor& t : op.inputs)
    if (depends(t)) return value_of(t, "an input").batch_dim;
  return -1;
}

std::string OnnxGraph::reshape_target(const Shape& shape, int64_t batch_dim) {
  std::vector<int64_t> v(shape.begin(), shape.end());
  if (dynamic_ && batch_dim >= 0) v[static_cast<size_t>(batch_dim)] = -1;
  return ints(v);
}

}  // namespace tessera::onnx_export
