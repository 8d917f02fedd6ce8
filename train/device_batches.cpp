// DeviceBatches (train/device_batches.h).
#include "tessera/train/device_batches.h"

#include "tessera/core/error.h"

namespace tessera::train {

DeviceBatches::DeviceBatches(data::DataLoader& loader, Device device, Targets targets)
    : loader_(loader), device_(device), targets_(std::move(targets)), lookahead_(!device.is_cpu()) {}

void DeviceBatches::start_epoch(int64_t epoch, int64_t count) {
  epoch_ = epoch;
  count_ = count;
  next_.reset();  // (a batch copied for an epoch cut short is dropped)
}

DeviceBatches::Pending DeviceBatches::fetch(int64_t index) {
  std::optional<data::Batch> batch = loader_.next();
  TS_CHECK(batch.has_value(), "train: the loader ended epoch ", epoch_, " after ", index, " of ", count_, " batches");
  const Tensor targets = targets_(*batch, epoch_, index);
  Pending p;
  p.count = batch->images.size(0);
  p.index = index;
  p.images = Upload(batch->images, device_);
  p.targets = Upload(targets, device_);
  return p;
}

DeviceBatches::Item DeviceBatches::next(int64_t index) {
  TS_CHECK(index >= 0 && index < count_, "DeviceBatches::next: batch ", index, " of an epoch of ", count_);
  Pending current = next_ && next_->index == index ? std::move(*next_) : fetch(index);
  next_.reset();
  Item item{current.images.ready(), current.targets.ready(), current.count};
  if (lookahead_ && index + 1 < count_) next_ = fetch(index + 1);
  return item;
}

}  // namespace tessera::train
