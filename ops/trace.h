// Op tracing: while an OpTracer is installed on a thread, the op front ends a model's forward pass
// uses report each call after it ran — the op's public name, its tensor inputs and outputs and its
// other arguments. The ONNX exporter (io/onnx_export.h) builds its graph this way, from the very
// forward code that runs the model, so an exported graph cannot drift from the model it came from.
// Ops report what they mean (linear; a transpose as permute with its dims; select with its dim and
// index), not the kernels they ran.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/ops/op_list.h"

namespace tessera {

using TraceValue = std::variant<int64_t, double, std::vector<int64_t>, std::string>;

struct TracedOp {
  OpId op;                     // the op as ops/op_list.h declares it: linear, permute, add
  std::vector<Tensor> inputs;  // an absent optional input (a bias) is an undefined Tensor
  std::vector<Tensor> outputs;
  std::vector<std::pair<const char*, TraceValue>> args;  // the op's other arguments, by name

  const char* name() const { return op_name(op); }
  // The argument `name` (throws naming the op when it is missing or of another type).
  template <class T>
  const T& arg(const char* name) const;
};

class OpTracer {
 public:
  virtual ~OpTracer() = default;
  virtual void record(const TracedOp& op) = 0;

  // The tracer installed on this thread (null: none, the common case: one load per op).
  static OpTracer* current() { return current_; }
  // Installs `tracer` (null: none) on this thread and returns the previous one.
  static OpTracer* install(OpTracer* tracer);

 private:
  static constinit thread_local OpTracer* current_;
};

// For the front ends, opened first thing in a traced op:
//   TraceScope trace;
//   ... compute y ...
//   if (trace.outermost()) trace.record(OpId::linear, {x, weight, bias}, {y});
// Only the outermost traced op of a call is reported: an op that another traced op runs inside
// (layer_norm inside a fused block, matmul inside linear under autocast) is part of it.
class TraceScope {
 public:
  TraceScope() : active_(OpTracer::current() != nullptr) {
    if (active_) ++depth_;
  }
  ~TraceScope() {
    if (active_) --depth_;
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

  bool outermost() const { return active_ && depth_ == 1; }
  void record(OpId op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
              std::vector<std::pair<const char*, TraceValue>> args = {}) const {
    OpTracer::current()->record(TracedOp{op, std::move(inputs), std::move(outputs), std::move(args)});
  }

 private:
  bool active_;
  static constinit thread_local int depth_;
};

template <class T>
const T& TracedOp::arg(const char* key) const {
  for (const auto& [k, v] : args)
    if (std::strcmp(k, key) == 0) {
      TS_CHECK(std::holds_alternative<T>(v), "trace: argument '", key, "' of ", name(), " has another type");
      return std::get<T>(v);
    }
  throw Error(detail::concat("trace: ", name(), " reported no argument '", key, "'"));
}

}  // namespace tessera
