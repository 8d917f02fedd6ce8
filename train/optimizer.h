// Optimizers for training: parameter groups with timm's weight-decay exclusions, AdamW / Adam / SGD
// (torch.optim semantics, the math in ops/optim.h), gradient clipping by global norm, and the
// optimizer state as named tensors for checkpoints.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessera/nn/module.h"
#include "tessera/ops/optim.h"

namespace tessera::train {

// Parameters sharing one weight decay (torch.optim's param_groups). Names are the model's
// parameter paths; they key the optimizer state in checkpoints.
struct ParamGroup {
  std::vector<std::pair<std::string, Tensor>> params;
  double weight_decay = 0.0;
  // The group's learning rate is the optimizer's times this (timm's lr_scale, set by layer-wise
  // lr decay, train/layer_decay.h).
  double lr_scale = 1.0;
};

// Whether a parameter is excluded from weight decay. It is when
//   1. it has at most one dimension or its name ends with ".bias" - timm's rule
//      (timm/optim/_param_groups.py:param_groups_weight_decay): biases, norm weights, 1-D
//      layer-scale gammas; or
//   2. its leaf name (after the last '.') is pos_embed, cls_token, cls_token<digits> (CoaT's
//      per-stage tokens), dist_token or temperature (XCiT's XCA), or begins with "gamma" (layer
//      scale: CaiT gamma_1/gamma_2, XCiT gamma1..3, UFO-ViT's XNorm gamma [heads, 1, 1]); or a path
//      component is "pos_embed" (XCiT's Fourier position encoding is a module; timm 1.0.31 lists
//      'pos_embed.*' for it); or
//   3. the full name matches a pattern in extra_no_decay (fnmatch wildcards, the syntax of timm's
//      model.no_weight_decay() sets).
// Rule 2 covers every model's no_weight_decay() set in timm (XCiT, CaiT, CoaT) plus the position
// embeddings, class tokens, layer-scale gammas and temperatures that are not 1-D.
bool skip_weight_decay(const std::string& name, const Tensor& param, const std::set<std::string>& extra_no_decay = {});

// The model's trainable parameters split as timm does: the no-decay group (weight_decay 0) first,
// then the decay group; empty groups are left out, and with weight_decay 0 everything is one group.
std::vector<ParamGroup> param_groups(const nn::Module& model, double weight_decay,
                                     const std::set<std::string>& extra_no_decay = {});

// Base of the optimizers. step() updates every parameter that has a gradient (parameters without
// one keep their value and state, as in PyTorch) and runs without autograd recording. All groups
// share one learning rate, which the trainer sets from the schedule before each step; a group
// updates with that rate times its lr_scale.
// One update as the trainer asks for it: gradient clipping, the step, and the parameters' EMA.
// How these are carried out is the optimizer's business (Optimizer::step(const UpdateOptions&)).
struct UpdateOptions {
  double clip_grad = 0.0;  // max global gradient norm (clip_grad_norm); 0: off
  // Empty, or one tensor per parameter in parameters() order: the EMA tensor that follows it
  // (ModelEma::average_of), undefined where the caller updates the EMA itself.
  std::vector<Tensor> emas;
  double ema_weight = 0.0;  // 1 − decay (ModelEma::weight_at) of the update about to be made
};

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;
  virtual void step() = 0;
  // One update with clipping and the EMA (UpdateOptions); returns the EMA tensors it moved, which
  // ModelEma::update must skip. This base clips with clip_grad_norm, calls step() and moves no
  // EMA tensor; an optimizer that can do all three in its own pass overrides it (AdamW), so the
  // trainer needs no knowledge of which optimizer it drives.
  virtual std::vector<Tensor> step(const UpdateOptions& update);
  // Drops every gradient (leaves them undefined, not zero-filled: the next backward allocates).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);

  // ---- CUDA Graphs (train/step_graph.h) ------------------------------------------------------------
  // A captured step replays its launches with the arguments they were captured with. Capturable,
  // the optimizer keeps what changes from update to update (each group's learning rate, the update
  // number, the EMA weight) in a device tensor that begin_step() rewrites and counts the update in,
  // and its kernels read the values there when they run (PyTorch's capturable=True). Every
  // parameter is then updated at every step, so each needs a gradient.
  virtual bool supports_capture() const { return false; }
  void set_capturable(bool on);
  bool capturable() const { return capturable_; }
  // The host half of the next update: the update counts advance and the values reach the device,
  // ahead of step()'s launches or of a graph's replay. Capturable optimizers only; never inside a
  // capture (the graph would hold this step's values for good).
  void begin_step(double ema_weight = 0.0);
  const std::vector<ParamGroup>& groups() const { return groups_; }
  std::vector<Tensor> parameters() const;  // in group order

  // The state of every parameter: "<param>.step" (int64 scalar, the number of updates it has
  // received) and "<param>.<buffer>" for each buffer of the algorithm (AdamW: exp_avg and
  // exp_avg_sq; SGD with momentum: momentum_buffer), zeros for a parameter never updated.
  nn::NamedTensors state_dict() const;
  // Restores a state_dict() of an optimizer of the same kind over the same parameters. Every key
  // must be present with the right shape and dtype, and no other key may appear; all problems are
  // reported in one error. The tensors are copied, so a run continues bit-identically.
  void load_state_dict(const nn::NamedTensors& state);

 protected:
  struct ParamState {
    int64_t step = 0;             // updates received; 0: buffers not created yet
    std::vector<Tensor> buffers;  // one per buffer_names(), undefined until the first update
  };
  // Names of the per-parameter state buffers, in the order of ParamState::buffers.
  virtual std::vector<std::string> buffer_names() const = 0;
  // The parameters of group g that have a gradient, bucketed by their update count (normally one
  // bucket): update(group, step number about to be taken (1-based), params, grads, buffers[k][i])
  // runs once per bucket, then the buckets' buffers and counts are stored back.
  using BatchUpdate = void(const ParamGroup& group, int64_t step, const std::vector<Tensor>& params,
                           const std::vector<Tensor>& grads, std::vector<std::vector<Tensor>>& buffers);
  void for_each_batch(const std::function<BatchUpdate>& update);
  // Capturable: group g's (lr, step, ema_weight) on the device, as the kernels read them.
  Tensor step_values_of(const ParamGroup& group) const;

 private:
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
  double lr_;
  bool capturable_ = false;
  bool begun_ = false;  // begin_step() was called since the last step() that ran (not one recorded)
  Tensor step_values_;  // [groups, 3] float64 on the parameters' device
};

// What AdamW::step(const FusedStep&) does in the update's own pass (ops/optim.h AdamFusion): the
// scaling of gradient clipping and the model EMA, bit-identical to clip_grad_norm before step()
// and ModelEma::update after it.
struct FusedStep {
  // clip_grad_scale's factor (undefined: the gradients as they are).
  Tensor grad_scale;
  // Empty, or one tensor per parameter in parameters() order: the EMA tensor that follows it
  // (ModelEma::average_of), or undefined where the caller updates the EMA itself.
  std::vector<Tensor> emas;
  double ema_weight = 0.0;  // 1 − decay (ModelEma::weight_at)
};

// torch.optim.AdamW (decoupled = true) or torch.optim.Adam (L2 weight decay), amsgrad off.
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        bool decoupled = true);
  std::string name() const override { return config_.decoupled ? "adamw" : "adam"; }
  bool supports_capture() const override { return true; }
  void step() override;
  // The fused update: the clipping factor (clip_grad_scale, the one launch that must read every
  // gradient first), then step(FusedStep) with it and the EMA tensors.
  std::vector<Tensor> step(const UpdateOptions& update) override;
  // step() with the work of `fused` in the same launches (one per parameter group, as step()).
  // Only the parameters that have a gradient are updated, and only their EMA tensors: the ones
  // averaged are returned, for ModelEma::update to skip. A parameter group in which some updated
  // parameter has no EMA tensor leaves all of its EMA to the caller.
  std::vector<Tensor> step(const FusedStep& fused);

 protected:
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 private:
  AdamConfig config_;
};

// torch.optim.SGD, dampening 0, coupled weight decay, optionally Nesterov.
class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0.9, bool nesterov = false);
  std::string name() const override { return config_.nesterov ? "nesterov" : "momentum"; }
  using Optimizer::step;  // step(const UpdateOptions&): the base's clip, step(), no EMA
  void step() override;

 protected:
  std::vector<std::string> buffer_names() const override;

 private:
  SgdConfig config_;
};

// An optimizer by timm's --opt name: "adamw", "adam", "sgd" and "nesterov" (SGD with Nesterov
// momentum, timm's default), "momentum" (SGD with classical momentum). Case-insensitive. eps and
// betas default to the optimizer's own (1e-8; 0.9, 0.999), as timm's --opt-eps/--opt-betas None.
// An unknown name is an error listing the valid ones.
std::unique_ptr<Optimizer> create_optimizer(const std::string& name, std::vector<ParamGroup> groups, double lr,
                                            double momentum = 0.9, std::optional<double> eps = std::nullopt,
                                            std::optional<std::array<double, 2>> betas = std::nullopt);

// torch.nn.utils.clip_grad_norm_(params, max_norm) with the L2 norm: the norm of all gradients
// taken together is returned (a 0-d float64 tensor on the gradients' device, computed there), and
// when it exceeds max_norm every gradient is scaled by max_norm / (norm + 1e-6). Parameters
// without a gradient are ignored. A non-finite norm is returned as is and leaves the gradients
// untouched.
Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The factor clip_grad_norm would scale every gradient by, computed on the gradients' device and
// nothing scaled: max_norm / (norm + 1e-6) where that is below 1, else exactly 1 (a non-finite
// norm included). For FusedStep::grad_scale. The sum of squares behind it is a launch of its own
// before the step's: every gradient must be read before any can be scaled.
Tensor clip_grad_scale(const std::vector<Tensor>& params, double max_norm);

}  // namespace tessera::train
