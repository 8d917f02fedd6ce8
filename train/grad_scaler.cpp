#include "tessera/train/grad_scaler.h"

#include <cmath>

#include "tessera/autograd/grad_mode.h"
#include "tessera/core/error.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/optim.h"

namespace tessera::train {

GradScaler::GradScaler(double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval)
    : scale_(init_scale),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {
  TS_CHECK(std::isfinite(init_scale) && init_scale > 0, "GradScaler: the scale must be positive and finite, got ",
           init_scale);
  TS_CHECK(growth_factor > 1 && backoff_factor > 0 && backoff_factor < 1 && growth_interval > 0,
           "GradScaler: expected growth_factor > 1, 0 < backoff_factor < 1 and growth_interval > 0");
}

Tensor GradScaler::scale(const Tensor& loss) const { return loss * scale_; }

bool GradScaler::unscale_(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return true;
  const Tensor inv = full({}, 1.0 / scale_, DType::Float64, grads.front().device());
  return tessera::unscale_(grads, inv).item() == 0.0;
}

void GradScaler::update(bool finite) {
  if (!finite) {
    scale_ *= backoff_factor_;
    growth_tracker_ = 0;
    ++skipped_;
    return;
  }
  if (++growth_tracker_ == growth_interval_) {
    scale_ *= growth_factor_;
    growth_tracker_ = 0;
  }
}

nn::NamedTensors GradScaler::state_dict() const {
  return {{"scale", full({}, scale_, DType::Float64)},
          {"growth_tracker", full({}, static_cast<double>(growth_tracker_), DType::Int64)},
          {"skipped", full({}, static_cast<double>(skipped_), DType::Int64)}};
}

void GradScaler::load_state_dict(const nn::NamedTensors& state) {
  bool scale = false, tracker = false;
  // The counters as saved: one int64 each (through item()'s double, a corrupt value would make
  // the conversion back undefined).
  const auto count = [](const std::string& name, const Tensor& t) {
    TS_CHECK(t.dtype() == DType::Int64 && t.numel() == 1, "GradScaler: load_state_dict: '", name,
             "' must be one int64, got ", dtype_name(t.dtype()), t.shape());
    return t.to_vector<int64_t>()[0];
  };
  for (const auto& [name, t] : state) {
    if (name == "scale") {
      TS_CHECK(t.numel() == 1, "GradScaler: load_state_dict: 'scale' must be one number, got shape ", t.shape());
      scale_ = t.item(), scale = true;
    } else if (name == "growth_tracker") {
      growth_tracker_ = count(name, t), tracker = true;
    } else if (name == "skipped") {
      skipped_ = count(name, t);
    } else {
      throw Error("GradScaler: load_state_dict: unexpected key '" + name + "'");
    }
  }
  TS_CHECK(scale && tracker, "GradScaler: load_state_dict: the state lacks 'scale' or 'growth_tracker'");
  TS_CHECK(std::isfinite(scale_) && scale_ > 0, "GradScaler: load_state_dict: invalid scale ", scale_);
}

}  // namespace tessera::train
