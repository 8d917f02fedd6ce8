// Tensor lists on the device, for kernels that take every tensor of a list in ONE launch (a
// multi-tensor apply: the optimizers, the casts of a model's weights). A small table goes to the
// device first — per tensor, its first element in the concatenation of all the tensors and the
// addresses of its arrays in each list — and each thread finds the tensor of its element by binary
// search.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/cuda/launch.h"

namespace tessera::cuda {

// The device copy of a call's tensor lists: start[i] (i <= count) is tensor i's first element in
// the concatenation, ptr[k·count + i] the address of list k's tensor i.
struct TensorTable {
  const int64_t* start;
  const uintptr_t* ptr;
  int64_t count;
  __device__ int64_t tensor_of(int64_t e) const {  // the i with start[i] <= e < start[i + 1]
    int64_t lo = 0, hi = count - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (start[mid] <= e) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
  template <class T>
  __device__ T* at(int list, int64_t i) const {
    return reinterpret_cast<T*>(ptr[list * count + i]);
  }
};

// Uploads the table of `lists` (all of the first list's length) and keeps it alive with the call.
struct DeviceTable {
  Tensor start, ptr;
  int64_t total = 0;
  TensorTable view() const {
    return {start.device_data<int64_t>(), reinterpret_cast<const uintptr_t*>(ptr.device_data<int64_t>()),
            start.numel() - 1};
  }
};

inline DeviceTable upload_table(const std::vector<const std::vector<Tensor>*>& lists) {
  const std::vector<Tensor>& first = *lists.front();
  const Device device = first.front().device();
  std::vector<int64_t> start{0}, ptr;
  for (const Tensor& t : first) start.push_back(start.back() + t.numel());
  for (const auto* list : lists)
    for (const Tensor& t : *list) ptr.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.device_raw_data())));
  DeviceTable d;
  d.total = start.back();
  d.start = from_blob(start.data(), {static_cast<int64_t>(start.size())}, DType::Int64).to(device);
  d.ptr = from_blob(ptr.data(), {static_cast<int64_t>(ptr.size())}, DType::Int64).to(device);
  return d;
}

}  // namespace tessera::cuda
