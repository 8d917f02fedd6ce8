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

#include "tessera/core/atomic_file.h"
#include "tessera/io/onnx/graph.h"
#include "tessera/io/onnx/lowerings.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/trace.h"

namespace tessera {

namespace {

using onnx_export::GraphValue;
using onnx_export::kTraceBatch;
using onnx_export::OnnxGraph;

constexpr int64_t kOpset = 17;

std::unordered_map<const TensorImpl*, std::string> parameter_names(const nn::Module& model) {
  std::unordered_map<const TensorImpl*, std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.emplace(&t.impl(), name);
  for (const auto& [name, t] : model.named_buffers()) names.emplace(&t.impl(), name);
  return names;
}

// Writes each traced op that depends on the image through its lowering (io/onnx/lowerings.h).
class Exporter final : public OpTracer {
 public:
  Exporter(const nn::Module& model, bool dynamic_batch)
      : dynamic_(dynamic_batch), graph_(init(model), parameter_names(model), dynamic_batch) {}

  void add_input(const Tensor& x) {
    graph_.bind(x, {"input", 0});
    describe_io(model_.mutable_graph()->add_input(), "input", x.shape());
  }

  void add_output(const Tensor& y) {
    const GraphValue& v = graph_.value_of(y, "the model's output");
    graph_.node("Identity", {v.name}, {"logits"});
    describe_io(model_.mutable_graph()->add_output(), "logits", y.shape());
  }

  onnx::ModelProto& model() { return model_; }

  void record(const TracedOp& op) override {
    // An op that does not depend on the image is part of a constant: nothing to write.
    bool depends = false;
    for (const Tensor& t : op.inputs) depends = depends || graph_.depends(t);
    if (!depends) return;
    const onnx_export::Lowering lower = onnx_export::lowering_of(op.op);
    TS_CHECK(lower != nullptr, "export: the op '", op.name(), "' has no ONNX form in Tessera's exporter yet");
    lower(graph_, op);
  }

 private:
  onnx::GraphProto* init(const nn::Module& model) {
    model_.set_ir_version(onnx::IR_VERSION_2019_3_18 + 2);  // IR 8, what opset 17 goes with
    model_.set_producer_name("tessera");
    onnx::OperatorSetIdProto* opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(kOpset);
    onnx::GraphProto* graph = model_.mutable_graph();
    graph->set_name(model.type_name());
    return graph;
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

  bool dynamic_;
  onnx::ModelProto model_;  // before graph_, which writes into it
  OnnxGraph graph_;
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
