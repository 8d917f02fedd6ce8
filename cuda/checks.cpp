// Records of data-dependent checks made by kernels (see cuda/device.h and ops/kernels/checks.h).
#include <map>
#include <mutex>
#include <vector>

#include "tessera/core/dispatch.h"
#include "tessera/core/error.h"
#include "tessera/cuda/device.h"

namespace tessera::cuda {

namespace {

struct DeviceChecks {
  CheckRecord* record = nullptr;      // device memory, zero while no check failed
  std::map<int, RangeCheck> pending;  // checks issued since the last synchronisation
  int next_id = 1;
};

std::mutex mutex;
std::vector<DeviceChecks>& all_devices() {
  static auto* devices = new std::vector<DeviceChecks>;  // never destroyed, as the device memory it points to
  return *devices;
}

DeviceChecks& checks_of(int device) {
  std::vector<DeviceChecks>& devices = all_devices();
  if (static_cast<int>(devices.size()) <= device) devices.resize(device + 1);
  DeviceChecks& d = devices[device];
  if (!d.record) {
    DeviceGuard guard(Device::cuda(device));
    void* p = nullptr;
    check(cudaMalloc(&p, sizeof(CheckRecord)), "cudaMalloc (check record)");
    count_device_launch(LaunchKind::Memory);
    check(cudaMemsetAsync(p, 0, sizeof(CheckRecord), current_stream(device)), "cudaMemsetAsync (check record)");
    d.record = static_cast<CheckRecord*>(p);
  }
  return d;
}

}  // namespace

CheckRecord* begin_check(int device, const RangeCheck& check, int& id) {
  std::lock_guard<std::mutex> lock(mutex);
  DeviceChecks& d = checks_of(device);
  id = d.next_id++;
  d.pending.emplace(id, check);
  return d.record;
}

int next_check_id(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  return checks_of(device).next_id;
}

std::map<int, RangeCheck> checks_since(int device, int first) {
  std::lock_guard<std::mutex> lock(mutex);
  const DeviceChecks& d = checks_of(device);
  return {d.pending.lower_bound(first), d.pending.end()};
}

void reissue_checks(int device, const std::map<int, RangeCheck>& checks) {
  if (checks.empty()) return;
  std::lock_guard<std::mutex> lock(mutex);
  checks_of(device).pending.insert(checks.begin(), checks.end());
}

void raise_failed_checks(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<DeviceChecks>& devices = all_devices();
  if (static_cast<int>(devices.size()) <= device || devices[device].pending.empty()) return;  // nothing to read
  DeviceChecks& d = devices[device];
  DeviceGuard guard(Device::cuda(device));
  CheckRecord r{};
  count_device_launch(LaunchKind::Memory);
  check(cudaMemcpy(&r, d.record, sizeof r, cudaMemcpyDeviceToHost), "reading the check record");
  std::map<int, RangeCheck> pending;
  pending.swap(d.pending);
  if (!r.claimed) return;
  count_device_launch(LaunchKind::Memory);
  check(cudaMemsetAsync(d.record, 0, sizeof(CheckRecord), current_stream(device)), "clearing the check record");
  check(cudaStreamSynchronize(current_stream(device)), "clearing the check record");
  auto it = pending.find(r.check);
  TS_CHECK(it != pending.end(), "cuda: a kernel reported a failed check ", r.check,
           " that was not issued (internal error)");
  throw Error(it->second.message(r.value, r.position));
}

}  // namespace tessera::cuda
