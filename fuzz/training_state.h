// The training run whose checkpoint's state file fuzz_checkpoint_state reads, and whose valid
// state file make_seeds writes: AdamW, a model EMA and a float16 loss scaler, so every section of
// the state file the trainer restores is there ("optimizer.", "ema.", "amp.", "rng.*",
// "trainer.global_step"). The model is the smallest one with every kind of state a model brings:
// a weight matrix and 1-D parameters (AdamW's two weight-decay groups), a LayerNorm, and
// BatchNorm's running statistics with its int64 batch counter. A real model (a depth-1 XCiT has
// 307 state tensors) repeats those kinds many times over: each input then costs ten times more to
// read and a mutation rarely lands in the header, while reaching no code this one does not.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "tessera/io/safetensors.h"
#include "tessera/nn/layers.h"
#include "tessera/ops/ops.h"
#include "tessera/train/checkpoint.h"
#include "tessera/train/ema.h"
#include "tessera/train/grad_scaler.h"
#include "tessera/train/optimizer.h"

namespace tessera::fuzz {

// The id both files of the pair carry (train/checkpoint.h: a pair is complete when they match).
inline constexpr const char* kCheckpointId = "00000000f0220000";

struct TrainingState {
  std::shared_ptr<nn::Sequential> model = std::make_shared<nn::Sequential>();
  std::unique_ptr<train::Optimizer> optimizer;
  std::unique_ptr<train::ModelEma> ema;
  train::GradScaler scaler;

  TrainingState() {
    model->push_back(std::make_shared<nn::Linear>(4, 3));
    model->push_back(std::make_shared<nn::LayerNorm>(3));
    model->push_back(std::make_shared<nn::BatchNorm2d>(3));
    optimizer = train::create_optimizer("adamw", train::param_groups(*model, 0.05), 1e-3, 0.9);
    ema = std::make_unique<train::ModelEma>(*model, 0.99);
  }

  // The state file's tensors, as the trainer writes them at the end of an epoch.
  nn::NamedTensors state_dict() const {
    nn::NamedTensors state = train::with_prefix("optimizer.", optimizer->state_dict());
    for (auto& e : train::with_prefix("ema.", ema->state_dict())) state.push_back(std::move(e));
    for (auto& e : train::with_prefix("amp.", scaler.state_dict())) state.push_back(std::move(e));
    const auto scalar = [](int64_t v) { return from_vector(std::vector<int64_t>{v}, {1}); };
    state.emplace_back("rng.seed", scalar(42));
    state.emplace_back("rng.offset", scalar(7));
    state.emplace_back("trainer.global_step", scalar(3));
    return state;
  }

  // The metadata CheckpointSaver gives a state file.
  static std::map<std::string, std::string> state_metadata() {
    return {{"epoch", "0"}, {"metric", "50.0"}, {"metric_name", "top1"}, {"checkpoint_id", kCheckpointId}};
  }

  void save_weights(const std::string& path) const {
    save_safetensors(path, model->state_dict(), {{"format", "pt"}, {"epoch", "0"}, {"checkpoint_id", kCheckpointId}});
  }

  // What Trainer's constructor does with a checkpoint on --resume (train/trainer.cpp), each
  // component refusing a state that does not fit it.
  void restore(const train::CheckpointData& ck) {
    model->load_state_dict(ck.weights);
    optimizer->load_state_dict(train::strip_prefix("optimizer.", ck.state));
    ema->load_state_dict(train::strip_prefix("ema.", ck.state));
    const nn::NamedTensors amp = train::strip_prefix("amp.", ck.state);
    if (!amp.empty()) scaler.load_state_dict(amp);
    for (const char* key : {"rng.seed", "rng.offset", "trainer.global_step"}) (void)train::state_scalar(ck, key);
  }
};

}  // namespace tessera::fuzz
