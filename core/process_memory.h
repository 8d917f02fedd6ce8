// The process's resident memory as the kernel reports it (/proc/self/status): what a user sees in
// `top`, including code, libraries and allocator caches. `tessera bench` reports it next to the
// tensor peak (core/storage.h memory_stats) so both views can be compared with PyTorch's; the
// trainer logs it after every epoch, so a leak shows as growth over a long run.
#pragma once
#include <cstdint>

namespace tessera {

// In bytes; 0 where /proc/self/status does not exist (not Linux).
int64_t resident_bytes();       // VmRSS now
int64_t peak_resident_bytes();  // VmHWM: the high-water mark since the process started

}  // namespace tessera
