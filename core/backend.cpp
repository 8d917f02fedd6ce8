#include "tessera/core/backend.h"

#include "tessera/core/error.h"
#include "tessera/core/storage.h"

namespace tessera {

namespace {
// Constant-initialised: registrations from other translation units' static initialisers may run
// before anything in this file.
DeviceBackend* backends[kNumDeviceTypes] = {};
}  // namespace

void register_backend(DeviceType type, DeviceBackend* backend) { backends[static_cast<int>(type)] = backend; }

std::unique_ptr<DeviceGraph> DeviceBackend::capture_graph(int, const std::function<void()>&) {
  throw CaptureError("capture_graph: this device backend has no graphs");
}

std::shared_ptr<void> DeviceBackend::copy_beside(const Tensor&, const Tensor&) { return nullptr; }

void DeviceBackend::wait_beside(const std::shared_ptr<void>&) {}

std::shared_ptr<void> DeviceBackend::mark_time(int) { return nullptr; }

double DeviceBackend::elapsed_ms(const std::shared_ptr<void>&, const std::shared_ptr<void>&) {
  throw Error("elapsed_ms: this device backend has no timing marks (internal error)");
}

size_t DeviceBackend::block_shared_memory(int) { return 0; }

DeviceBackend* find_backend(DeviceType type) { return backends[static_cast<int>(type)]; }

std::string unavailable_reason(Device device) {
  if (device.is_cpu()) return device.index == 0 ? "" : "there is one cpu device, cpu:0";
  DeviceBackend* b = find_backend(device.type);
  if (!b)
    return "Tessera was built without the CUDA backend (configure with -DTESSERA_CUDA=ON for a GPU, or "
           "-DTESSERA_CUDA_EMU=ON for the SIMT emulator)";
  const int count = b->device_count();
  if (count == 0) return b->unavailable_reason();
  if (device.index < 0 || device.index >= count)
    return detail::concat("device index ", device.index, " is out of range (", count, " device", count == 1 ? "" : "s",
                          " visible)");
  return "";
}

DeviceBackend& backend_for(Device device) {
  const std::string reason = unavailable_reason(device);
  TS_CHECK(reason.empty(), device.str(), " is not available: ", reason);
  return *find_backend(device.type);
}

int device_count(DeviceType type) {
  if (type == DeviceType::CPU) return 1;
  DeviceBackend* b = find_backend(type);
  return b ? b->device_count() : 0;
}

bool is_available(Device device) { return unavailable_reason(device).empty(); }

void synchronize(Device device) {
  if (!device.is_cpu()) backend_for(device).synchronize(device.index);
}

size_t block_shared_memory(Device device) {
  return device.is_cpu() ? 0 : backend_for(device).block_shared_memory(device.index);
}

AllocatorStats allocator_stats(Device device) { return allocator_for(device).stats(); }

void empty_cache(Device device) { allocator_for(device).empty_cache(); }

Allocator* pinned_host_allocator(DeviceType type) {
  DeviceBackend* b = type == DeviceType::CPU ? nullptr : find_backend(type);
  return b ? b->pinned_host_allocator() : nullptr;
}

DeviceGuard::DeviceGuard(Device device) {
  if (device.is_cpu()) return;
  backend_ = &backend_for(device);
  previous_ = backend_->current_device();
  if (previous_ != device.index) backend_->set_current_device(device.index);
}

DeviceGuard::~DeviceGuard() {
  if (backend_ && backend_->current_device() != previous_) backend_->set_current_device(previous_);
}

}  // namespace tessera
