// The casts of a model's weights under autocast, made ahead of the forward pass. Under autocast the
// GEMMs and convolutions round their float32 weights to bfloat16/float16 (core/autocast.h); cast one
// by one where they are used, that is a launch per weight in the forward pass and another in the
// backward pass (CoaT-Lite-Small: 374 of a training step's ~2,100). An AutocastWeights::Pass casts
// them all in one cast_all (ops/cast_all.h: one launch forward, one backward) on entry and hands
// each op the copy of its weight. Every result is that of the per-use casts, bit for bit: a weight
// used again in a pass (CoaT's shared position encodings) reads the same copy, but each use's
// gradient goes back to float32 on its own and they add up there, as per-use casts' do
// (torch.autocast's cache hands out one copy, whose gradients then add up in 16 bits).
//
// Which parameters a pass casts is learned, not guessed (a norm's weight is read in float32, a
// linear's bias is rounded): the first pass casts each weight where it is used and remembers it;
// every later pass casts the remembered ones on entry. A weight the set lacks is cast at its use and
// joins the next pass's set; one no longer used leaves it.
//
// Passes that record no graph (inference: validate, predict, bench --mode infer) keep the copies for
// the next pass, which reuses each one whose weight has not been written since (its storage version,
// which every in-place write bumps): a model's weights are cast once, not once per batch (CoaT-Lite
// Tiny in bfloat16 on the CPU: a pass's one cast_all was 2.5% of it). The copies take half the
// float32 weights' bytes while the owner lives.
//
// The trade: the weights' gradients all arrive when the backward pass ends (the one cast node runs
// after every use of every weight), so a data-parallel run, which sends buckets of gradients while
// backward still runs (train/distributed/reducer.h), keeps the per-use casts. TESSERA_AMP_CAST_AHEAD=0
// turns the lever off everywhere (docs/cuda.md, "Levers").
#pragma once
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

class AutocastWeights {
 public:
  // `enabled` false (or TESSERA_AMP_CAST_AHEAD=0): every Pass is inert, each weight is cast at its use.
  explicit AutocastWeights(bool enabled = true);

  // One forward pass: constructed after the AutocastGuard for `device`, destroyed before it. Inert
  // when autocast is off on `device` or the owner is disabled. Passes nest (the innermost serves).
  class Pass {
   public:
    Pass(AutocastWeights& owner, Device device);
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

   private:
    friend Tensor autocast_cast(const Tensor& t, DType low);
    AutocastWeights* owner_ = nullptr;  // null: inert
    Pass* previous_ = nullptr;
    DType low_ = DType::BFloat16;
    std::unordered_map<const TensorImpl*, Tensor> copies_;  // weight -> its copy in low_
    std::unordered_set<const TensorImpl*> used_;
    std::vector<Tensor> used_in_order_;  // the next pass's set
    bool inference_ = false;             // no graph recorded: the copies outlive the pass
  };

 private:
  // A weight's copy as an inference pass left it, valid while the weight's storage version is.
  struct Kept {
    Tensor weight, copy;
    uint64_t version;
  };

  bool enabled_;
  std::vector<Tensor> learned_;  // the weights the last pass cast, in order of first use
  std::vector<Kept> kept_;       // after a pass without a graph: its copies
};

// For the front ends of ops under autocast: `t` rounded to `low` — for a weight (a leaf that
// requires grad, float32) in a pass, its copy (made ahead, or at the first use); otherwise
// t.to(low).
Tensor autocast_cast(const Tensor& t, DType low);

}  // namespace tessera
