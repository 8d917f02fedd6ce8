// Gradient averaging for data-parallel training, overlapped with backward (docs/distributed.md).
//
// The parameters are cut into buckets of about `bucket_bytes` in reverse order: backward produces
// the gradients of the last layers first, so the first bucket is complete while the first layers'
// gradients are still being computed. An autograd hook on each parameter (autograd/hooks.h)
// copies its finished gradient into the bucket's flat buffer; when a bucket is complete, its
// allreduce starts (asynchronously) and backward goes on. finish(), after backward, sends what is
// left, waits, and writes the averages back into the gradients.
//
// Buckets are sent strictly in bucket order, on a communicator of their own, so every rank issues
// the same collectives in the same order even when a parameter gets no gradient on some rank.
// Such a parameter counts as a zero gradient on that rank; one that gets no gradient on any rank
// keeps an undefined gradient (the optimizer skips it), as in a single process. Each bucket carries
// one "used" flag per parameter for that purpose, reduced with the gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/train/distributed/communicator.h"

namespace tessera::train::dist {

class GradReducer {
 public:
  static constexpr int64_t kDefaultBucketBytes = 25 << 20;  // DDP's default, 25 MiB

  GradReducer(const Communicator& comm, std::vector<Tensor> params, int64_t bucket_bytes = kDefaultBucketBytes);
  ~GradReducer();  // removes its hooks
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Before each backward. sync = false (a gradient-accumulation micro-step that does not end in an
  // update): gradients stay local and nothing is sent.
  void prepare(bool sync);
  // After backward: every parameter's gradient becomes the average over ranks.
  void finish();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  // The parameters (indices into the constructor's list) of bucket b, in the order they sit in it.
  const std::vector<int64_t>& bucket_params(int64_t b) const { return buckets_.at(static_cast<size_t>(b)).params; }
  // Buckets whose allreduce started before finish() in the last synchronized backward.
  int64_t buckets_sent_during_backward() const { return sent_in_backward_; }
  // Seconds finish() has blocked waiting on communication, in all.
  double wait_seconds() const { return wait_seconds_; }

 private:
  struct Bucket {
    std::vector<int64_t> params;
    std::vector<int64_t> offsets;  // of each parameter's gradient in flat; its flag follows them all
    int64_t flags_offset = 0;
    Tensor flat;
    int64_t ready = 0;
    std::unique_ptr<Work> work;
  };
  void on_gradient(int64_t param);
  void stage(Bucket& b, size_t slot, const Tensor& grad);
  void launch_ready();
  void launch(Bucket& b);

  std::unique_ptr<Communicator> comm_;
  std::vector<Tensor> params_;
  std::vector<int64_t> hooks_;
  std::vector<int64_t> bucket_of_, slot_of_;
  std::vector<bool> staged_;
  std::vector<Bucket> buckets_;
  size_t next_launch_ = 0;
  bool sync_ = false;
  int64_t sent_in_backward_ = 0;
  double wait_seconds_ = 0;
};

}  // namespace tessera::train::dist
