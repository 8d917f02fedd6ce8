#include "tessera/train/distributed/reducer.h"

#include "tessera/autograd/grad_mode.h"
#include "tessera/autograd/hooks.h"
#include "tessera/core/error.h"

namespace tessera::train::dist {

GradReducer::GradReducer(const Communicator& comm, std::vector<Tensor> params, int64_t bucket_bytes)
    : comm_(comm.duplicate()), params_(std::move(params)) {
  TS_CHECK(bucket_bytes > 0, "GradReducer: bucket size must be positive, got ", bucket_bytes);
  const int64_t n = static_cast<int64_t>(params_.size());
  bucket_of_.assign(static_cast<size_t>(n), -1);
  slot_of_.assign(static_cast<size_t>(n), -1);
  staged_.assign(static_cast<size_t>(n), false);
  // Reverse order; a new bucket when the current one is full or the dtype changes.
  int64_t bytes = 0;
  for (int64_t i = n - 1; i >= 0; --i) {
    const Tensor& p = params_[static_cast<size_t>(i)];
    TS_CHECK(p.defined() && p.is_leaf() && p.requires_grad() && is_floating(p.dtype()), "GradReducer: parameter ", i,
             " is not a floating leaf that requires grad");
    TS_CHECK(p.device() == comm_->device(), "GradReducer: parameter ", i, " is on ", p.device().str(), " but the ",
             comm_->backend(), " communicator reduces tensors on ", comm_->device().str());
    const int64_t pbytes = p.numel() * static_cast<int64_t>(p.element_size());
    if (buckets_.empty() || bytes + pbytes > bucket_bytes ||
        params_[static_cast<size_t>(buckets_.back().params.front())].dtype() != p.dtype()) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[static_cast<size_t>(i)] = static_cast<int64_t>(buckets_.size()) - 1;
    slot_of_[static_cast<size_t>(i)] = static_cast<int64_t>(b.params.size());
    b.params.push_back(i);
    bytes += pbytes;
  }
  for (Bucket& b : buckets_) {
    int64_t offset = 0;
    for (int64_t i : b.params) {
      b.offsets.push_back(offset);
      offset += params_[static_cast<size_t>(i)].numel();
    }
    b.flags_offset = offset;
    const Tensor& first = params_[static_cast<size_t>(b.params.front())];
    b.flat = Tensor::empty({offset + static_cast<int64_t>(b.params.size())}, first.dtype(), first.device());
  }
  for (int64_t i = 0; i < n; ++i)
    hooks_.push_back(autograd::add_post_accumulate_grad_hook(params_[static_cast<size_t>(i)],
                                                             [this, i](const Tensor&) { on_gradient(i); }));
}

GradReducer::~GradReducer() {
  for (size_t i = 0; i < params_.size(); ++i) autograd::remove_post_accumulate_grad_hook(params_[i], hooks_[i]);
}

void GradReducer::prepare(bool sync) {
  for (const Bucket& b : buckets_)
    TS_CHECK(!b.work, "GradReducer::prepare: the previous step's gradients were not finished (call finish())");
  sync_ = sync;
  next_launch_ = 0;
  sent_in_backward_ = 0;
  for (Bucket& b : buckets_) b.ready = 0;
  staged_.assign(staged_.size(), false);
}

void GradReducer::stage(Bucket& b, size_t slot, const Tensor& grad) {
  NoGradGuard no_grad;
  const int64_t param = b.params[slot];
  const int64_t numel = params_[static_cast<size_t>(param)].numel();
  Tensor dst = b.flat.narrow(0, b.offsets[slot], numel);
  Tensor flag = b.flat.narrow(0, b.flags_offset + static_cast<int64_t>(slot), 1);
  if (grad.defined()) {
    dst.copy_(grad.reshape({numel}));
    flag.fill_(1.0);
  } else {
    dst.zero_();
    flag.zero_();
  }
  staged_[static_cast<size_t>(param)] = true;
  ++b.ready;
}

void GradReducer::on_gradient(int64_t param) {
  if (!sync_) return;
  TS_CHECK(!staged_[static_cast<size_t>(param)], "GradReducer: parameter ", param,
           " received a second gradient in "
           "one synchronized step (more than one backward between prepare() and finish())");
  Bucket& b = buckets_[static_cast<size_t>(bucket_of_[static_cast<size_t>(param)])];
  stage(b, static_cast<size_t>(slot_of_[static_cast<size_t>(param)]), params_[static_cast<size_t>(param)].grad());
  launch_ready();
  // Keep the buckets already in flight moving: MPI progresses only inside its calls.
  for (Bucket& other : buckets_)
    if (other.work) other.work->test();
}

void GradReducer::launch_ready() {
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].ready == static_cast<int64_t>(buckets_[next_launch_].params.size()))
    launch(buckets_[next_launch_++]);
}

void GradReducer::launch(Bucket& b) { b.work = comm_->allreduce_async(b.flat, ReduceOp::Avg); }

void GradReducer::finish() {
  if (!sync_) return;
  sent_in_backward_ = static_cast<int64_t>(next_launch_);
  // Parameters backward did not reach in this pass: their gradient so far (earlier micro-steps)
  // or nothing.
  for (size_t k = next_launch_; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    for (size_t slot = 0; slot < b.params.size(); ++slot)
      if (!staged_[static_cast<size_t>(b.params[slot])])
        stage(b, slot, params_[static_cast<size_t>(b.params[slot])].grad());
    launch(b);
  }
  next_launch_ = buckets_.size();
  NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    b.work->wait();
    wait_seconds_ += b.work->waited_seconds();
    b.work.reset();
    const Tensor flags =
        b.flat.narrow(0, b.flags_offset, static_cast<int64_t>(b.params.size())).to(Device::cpu()).to(DType::Float64);
    for (size_t slot = 0; slot < b.params.size(); ++slot) {
      if (flags.data<double>()[slot] <= 0) continue;  // no rank had a gradient for it
      const Tensor& p = params_[static_cast<size_t>(b.params[slot])];
      const Tensor avg = b.flat.narrow(0, b.offsets[slot], p.numel()).view(p.shape());
      if (Tensor grad = p.grad(); grad.defined()) grad.copy_(avg);
      else p.set_grad(avg.clone());
    }
  }
  sync_ = false;
}

}  // namespace tessera::train::dist
