// Module: the unit layers and models are built from. A module owns named parameters, named
// buffers (e.g. BatchNorm running statistics) and named child modules; dotted paths through the
// tree ("blocks.0.attn.qkv.weight") are the state_dict keys, chosen to equal timm's byte for byte.
//
// Registration happens in constructors:
//   weight = register_parameter("weight", trunc_normal({out, in}, 0, .02));
//   norm1 = register_module("norm1", std::make_shared<LayerNorm>(d, 1e-6));
// The member handles and the registered tensors are the same Tensor, so loading a state_dict
// writes into them in place.
//
// A module registered under two names (CoaT shares one CPE/CRPE per stage) appears under every
// path in state_dict(), as in PyTorch, but once in parameters().
#pragma once
#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// What load_state_dict found besides matching keys. In strict mode any problem is an error
// that lists all of them; otherwise they are returned for the caller to report.
struct LoadReport {
  std::vector<std::string> missing;     // expected by the model, absent from the file
  std::vector<std::string> unexpected;  // in the file, unknown to the model
  std::vector<std::string> mismatched;  // present in both, different shape ("key: file [..] vs model [..]")
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  std::string str() const;
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The single-tensor forward used by containers (Sequential); modules with other signatures
  // define their own forward and leave this one throwing.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  // Class name for messages and summaries ("Linear", "XCABlock").
  virtual std::string type_name() const { return "Module"; }

  // ---- traversal ---------------------------------------------------------------------------------
  NamedTensors named_parameters() const;  // unique tensors, first path wins
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  // Every parameter and buffer under every path (aliases included): own parameters, own buffers,
  // then children in registration order - PyTorch's state_dict order.
  NamedTensors state_dict() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  int64_t num_parameters() const;

  // Copies tensors into the model's parameters and buffers (converting dtype, e.g. float16 files
  // into float32 models). Shapes must match. Several alias paths of one tensor must agree.
  LoadReport load_state_dict(const NamedTensors& state, bool strict = true);

  // ---- modes -------------------------------------------------------------------------------------
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();
  // Converts every floating parameter and buffer to `dtype` in place: the tensors keep their
  // identity (member handles stay valid), their data are replaced. float64 is for gradient checks.
  void to(DType dtype);
  // Moves every parameter and buffer to `device` the same way (gradients are dropped).
  void to(Device device);
  // The device of the module's parameters and buffers (cpu for a module without any).
  Device device() const;

 protected:
  Tensor register_parameter(const std::string& name, Tensor value);  // marks it requires_grad
  Tensor register_buffer(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    check_new_name(name);
    children_.emplace_back(name, module);
    return module;
  }
  // Replaces the tensor registered as `name` (e.g. a resized position table) and returns it.
  Tensor replace_parameter(const std::string& name, Tensor value);

 private:
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool buffers, NamedTensors& out) const;

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// ---- observing a forward pass ----------------------------------------------------------------------
// Module boundaries during forward, for tools that follow a pass layer by layer (`tessera inspect
// --summary`, as torchinfo does) without any model knowing about them. Modules call each other's
// forward overloads directly (with grids, pairs of tensors, ...), so there is no common call
// wrapper to hook; instead every forward opens a ForwardScope on its own module first and returns
// through it:
//   Tensor Linear::forward(const Tensor& x) {
//     ForwardScope scope(*this);
//     return scope.output(linear(x, weight, bias));
//   }
// With no observer on the thread a scope costs one thread-local load and a branch.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  virtual void enter(const Module& module) = 0;
  // What forward returned; empty when it left by an exception. Must not throw (it runs while
  // unwinding).
  virtual void exit(const Module& module, const std::vector<Tensor>& outputs) noexcept = 0;
  // Values a module computes inside its forward for a teaching tool to show (`tessera explain`):
  // an attention map that a fused op never materialises otherwise, what a block received. Only an
  // observer that wants them gets them, so a pass without one computes none of them.
  virtual bool wants_probes() const { return false; }
  virtual void probe(const Module& /*module*/, const std::string& /*name*/, const Tensor& /*value*/) {}
};

class ForwardScope {
 public:
  explicit ForwardScope(const Module& module) {
    if (observer_) open(module);
  }
  ~ForwardScope() {
    if (open_) close();
  }
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;

  Tensor output(Tensor y) {
    if (open_) outputs_.push_back(y);
    return y;
  }
  template <size_t N>
  std::array<Tensor, N> output(std::array<Tensor, N> ys) {
    if (open_) outputs_.assign(ys.begin(), ys.end());
    return ys;
  }
  // True when the observer wants this module's probes: compute a value only to probe it then.
  bool probing() const { return open_ && observer_->wants_probes(); }
  // Shows `value` to the observer under `name` (ForwardObserver::probe) when it wants probes.
  void probe(const std::string& name, const Tensor& value) {
    if (probing()) observer_->probe(*module_, name, value);
  }

 private:
  friend class ObserveForward;
  void open(const Module& module);
  void close() noexcept;

  // Only the thread's observer and its innermost open scope; constinit keeps the check inline
  // (no thread-local initialisation wrapper).
  static constinit thread_local ForwardObserver* observer_;
  static constinit thread_local ForwardScope* innermost_;
  const Module* module_ = nullptr;
  ForwardScope* parent_ = nullptr;
  bool open_ = false;
  std::vector<Tensor> outputs_;
};

// Installs `observer` on this thread for its lifetime (the previous one comes back after). Install
// it around whole forward passes.
class ObserveForward {
 public:
  explicit ObserveForward(ForwardObserver& observer);
  ~ObserveForward();
  ObserveForward(const ObserveForward&) = delete;
  ObserveForward& operator=(const ObserveForward&) = delete;

 private:
  ForwardObserver* previous_;
};

}  // namespace tessera::nn
