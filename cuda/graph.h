// The CUDA backend's side of graphs (core/graph.h), for the backend's own code: the capture, and
// what the allocator and the host-to-device copies do differently while a device captures.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "tessera/core/graph.h"
#include "tessera/core/tensor.h"

namespace tessera::cuda {

// DeviceBackend::capture_graph of the CUDA backend.
std::unique_ptr<DeviceGraph> capture(int device, const std::function<void()>& work);

// The key under which the device's caching allocator files a block allocated now: the device's
// stream, or while it captures, the graph's private pool.
uintptr_t allocation_pool(int device);

// The host address a host-to-device copy of `host` to `device` reads: the tensor's own, or while
// the device captures, a pinned copy kept with the graph (each replay reads it again).
const void* host_source_for_copy(int device, const Tensor& host);

}  // namespace tessera::cuda
