// The emulated CUDA runtime (see cuda_runtime.h).
#include "tessera/cuda/emu/cuda_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using tessera::cuda::emu::Poll;

// A unit of a stream's work: a kernel grid, a library call, a copy. `run` does it, or starts it and
// returns how to tell when it is done (an asynchronous node: a collective waiting for its peers).
struct EmuNode {
  const char* label;
  std::function<Poll()> run;
};
// A stream's capture: the work recorded since cudaStreamBeginCapture, in order.
struct EmuCapture {
  cudaStreamCaptureMode mode;
  std::vector<EmuNode> nodes;
  bool invalidated = false;
};
struct EmuStream {
  int device = 0;
  int index = 0;  // 0: the device's first stream
  std::unique_ptr<EmuCapture> capture;
  bool held = false;            // its work waits to be waited for (side streams; every stream under TESSERA_EMU_ASYNC)
  std::deque<EmuNode> pending;  // held work not run yet, in order
  size_t queued = 0, ran = 0;   // work items queued on it, and started, since its creation
  Poll inflight;                // the last started node, while it has not completed
  size_t inflight_index = 0;    // its position (1-based) among the queued items
  long trace_record = -1;       // its record in the trace, if one is being taken
};
struct EmuEvent {
  bool captured = false;        // last recorded on a capturing stream: it completes only in a replay
  EmuStream* stream = nullptr;  // last recorded on this stream,
  size_t mark = 0;              // after its first `mark` work items
  bool timing = true;           // created without cudaEventDisableTiming
  bool reached = false;         // completed, at host time `time_ms`
  double time_ms = 0;
};
struct EmuGraph {
  std::vector<EmuNode> nodes;
};
struct EmuGraphExec {
  std::vector<EmuNode> nodes;
};

namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  const long long n = std::atoll(v);
  return n > 0 ? static_cast<size_t>(n) : fallback;
}

int configured_devices() { return static_cast<int>(env_size("TESSERA_EMU_DEVICES", 1)); }
// TESSERA_EMU_ASYNC=1: every stream holds its work back until something waits for it, the device's
// first stream too, as a GPU runs behind the host: work queued on one stream that another stream
// reads without waiting for it is then read unfinished (a missing cudaStreamWaitEvent shows).
bool configured_async() { return env_size("TESSERA_EMU_ASYNC", 0) != 0; }
size_t configured_capacity() { return env_size("TESSERA_EMU_MEMORY_MB", 16384) << 20; }

struct Allocation {
  size_t bytes;
  int device;  // -1: pinned host memory
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;  // by start address
  std::vector<size_t> used;
  size_t capacity = configured_capacity();
  std::vector<EmuStream*> capturing;  // streams in capture mode
  std::vector<int> streams_made;      // per device: streams created so far (the first is index 0)
  std::vector<EmuStream*> streams;    // live streams
  // Kernels' cudaFuncAttributeMaxDynamicSharedMemorySize, by (device, kernel): set per device, as a
  // kernel is loaded into each device's context separately.
  std::map<std::pair<int, const void*>, size_t> dynamic_shared;
  State()
      : used(static_cast<size_t>(configured_devices()), 0), streams_made(static_cast<size_t>(configured_devices())) {}
};

// Never destroyed: tensors freed by static destructors at exit still find their allocations.
State& state() {
  static State* s = new State;
  return *s;
}

thread_local int current_device = 0;
thread_local cudaStreamCaptureMode thread_capture_mode = cudaStreamCaptureModeGlobal;
thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

// The allocation of `kind` (a device index, or -1 for pinned host) that holds [p, p + bytes), if any.
const Allocation* find(const void* p, size_t bytes, bool device) {
  State& s = state();
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = s.allocations.upper_bound(addr);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  if ((a.device >= 0) != device) return nullptr;
  return addr + bytes <= it->first + a.bytes ? &a : nullptr;
}

bool in_device_memory(const void* p, size_t bytes) { return find(p, bytes, true) != nullptr; }

// Checks a copy's pointers: those that must be device memory lie inside live device allocations.
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(state().mutex);
  const bool dst_dev = in_device_memory(dst, bytes), src_dev = in_device_memory(src, bytes);
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToHost: ok = !dst_dev && !src_dev; break;
    case cudaMemcpyHostToDevice: ok = dst_dev && !src_dev; break;
    case cudaMemcpyDeviceToHost: ok = !dst_dev && src_dev; break;
    case cudaMemcpyDeviceToDevice: ok = dst_dev && src_dev; break;
    case cudaMemcpyDefault: break;
    default: return fail(cudaErrorInvalidMemcpyDirection);
  }
  return ok ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t e = check_copy(dst, src, bytes, kind); e != cudaSuccess) return e;
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

// A call that CUDA calls potentially unsafe during a capture (an allocation, a free, a synchronous
// copy): refused, and every capture it could disturb invalidated, unless the calling thread's mode
// is relaxed or no capture but relaxed ones is under way. Called with the state's mutex held.
bool unsafe_during_capture_locked() {
  if (thread_capture_mode == cudaStreamCaptureModeRelaxed) return false;
  bool unsafe = false;
  for (EmuStream* s : state().capturing)
    if (s->capture->mode != cudaStreamCaptureModeRelaxed) {
      s->capture->invalidated = true;
      unsafe = true;
    }
  return unsafe;
}

bool unsafe_during_capture() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return unsafe_during_capture_locked();
}

bool is_capturing(cudaStream_t stream) { return stream && stream->capture; }

bool is_any_capture_under_way() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return !state().capturing.empty();
}

// Held-back work runs under this lock, from whichever thread waits for it.
std::recursive_mutex& side_mutex() {
  static auto* m = new std::recursive_mutex;
  return *m;
}

// The host's clock, for events' completion times and the trace.
double host_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The trace (tessera::cuda::emu::trace_start), guarded by side_mutex().
bool tracing = false;
std::vector<tessera::cuda::emu::TraceRecord> trace_records;
double trace_origin_ms = 0;

bool is_live(EmuStream* stream) {
  std::lock_guard<std::mutex> state_lock(state().mutex);  // a destroyed stream has nothing left
  const auto& live = state().streams;
  return std::find(live.begin(), live.end(), stream) != live.end();
}

// Blocks until an asynchronous node has completed, as the device would make its stream wait.
void wait_until(const Poll& done) {
  while (!done()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Says whether the stream's node in flight (if any) has completed; with `blocking`, waits until it
// has. Called with side_mutex() held.
bool settle(EmuStream* stream, bool blocking) {
  if (!stream->inflight) return true;
  if (!blocking && !stream->inflight()) return false;
  wait_until(stream->inflight);
  stream->inflight = nullptr;
  if (stream->trace_record >= 0)
    trace_records[static_cast<size_t>(stream->trace_record)].end_ms = host_ms() - trace_origin_ms;
  stream->trace_record = -1;
  return true;
}

// Starts a node, in stream order (the previous one has completed). Called with side_mutex() held.
void run_node(EmuStream* stream, EmuNode& node) {
  long record = -1;
  if (tracing) {
    record = static_cast<long>(trace_records.size());
    trace_records.push_back(
        {stream ? stream->device : 0, stream ? stream->index : 0, node.label, host_ms() - trace_origin_ms, 0});
  }
  Poll poll = node.run();
  if (poll && !poll()) {
    if (!stream) {  // the legacy stream: the host waits
      wait_until(poll);
    } else {
      stream->inflight = std::move(poll);
      stream->inflight_index = stream->ran;
      stream->trace_record = record;
      return;
    }
  }
  if (record >= 0) trace_records[static_cast<size_t>(record)].end_ms = host_ms() - trace_origin_ms;
}

// Runs a stream's held-back work until `upto` items have started (all of it by default) and says
// whether they have all completed; with `blocking`, waits until they have.
bool run_held_back(EmuStream* stream, size_t upto = SIZE_MAX, bool blocking = true) {
  std::lock_guard<std::recursive_mutex> lock(side_mutex());
  if (!is_live(stream)) return true;
  while (stream->ran < upto && !stream->pending.empty()) {
    if (!settle(stream, blocking)) return false;
    EmuNode node = std::move(stream->pending.front());
    stream->pending.pop_front();
    ++stream->ran;
    run_node(stream, node);
  }
  if (stream->inflight && stream->inflight_index <= upto) return settle(stream, blocking);
  return true;
}

// Runs the work an event was recorded after, if held back, and says whether it has completed
// (marking the event so); with `blocking`, waits until it has.
bool reach_event(EmuEvent* event, bool blocking = true) {
  if (event->stream && !run_held_back(event->stream, event->mark, blocking)) return false;
  if (!event->reached && !event->captured) {
    event->reached = true;
    event->time_ms = host_ms();
  }
  return true;
}

// Every stream's work (of `device`, or of all devices when -1), to completion.
void run_all_held_back(int device = -1) {
  std::vector<EmuStream*> streams;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    streams = state().streams;
  }
  for (EmuStream* s : streams)
    if (device < 0 || s->device == device) run_held_back(s);
}

// Queues work that is not being captured: run now on a stream that is not held (after the node in
// flight on it, if any, has completed), held on one that is.
void run_or_hold(cudaStream_t stream, EmuNode node) {
  std::lock_guard<std::recursive_mutex> lock(side_mutex());
  if (stream && stream->held) {
    stream->pending.push_back(std::move(node));
    ++stream->queued;
    return;
  }
  if (stream) {
    settle(stream, true);
    ++stream->queued;
    ++stream->ran;
  }
  run_node(stream, node);
}

EmuNode plain(const char* label, std::function<void()> work) {
  return {label, [work = std::move(work)] {
            work();
            return Poll{};
          }};
}

void enqueue_node(cudaStream_t stream, EmuNode node) {
  if (is_capturing(stream)) stream->capture->nodes.push_back(std::move(node));
  else run_or_hold(stream, std::move(node));
}

// Checks the operands of an asynchronous copy on `stream`; one recorded into a graph may touch only
// device and pinned memory, which outlive the call.
cudaError_t check_async_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (!is_capturing(stream)) return cudaSuccess;
  std::lock_guard<std::mutex> lock(state().mutex);
  const auto reachable = [&](const void* p) { return find(p, bytes, true) || find(p, bytes, false); };
  if (kind == cudaMemcpyHostToHost || !reachable(dst) || !reachable(src)) {
    stream->capture->invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}

}  // namespace

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation is not permitted in the current state";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = static_cast<int>(state().used.size());
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= static_cast<int>(state().used.size())) return fail(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= static_cast<int>(state().used.size())) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, "Tessera SIMT emulator", sizeof prop->name - 1);
  prop->totalGlobalMem = state().capacity;
  prop->sharedMemPerBlock = tessera::cuda::emu::kSharedBytesPerBlock;
  prop->multiProcessorCount = 4;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= static_cast<int>(state().used.size())) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(tessera::cuda::emu::kSharedBytesPerBlock);
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(tessera::cuda::emu::kSharedBytesPerBlockOptIn);
      return cudaSuccess;
  }
  return fail(cudaErrorInvalidValue);
}

// CUDA refuses more than the device's opt-in limit (less the kernel's static arrays, which the
// emulator learns only as the kernel runs: simt.cpp checks their sum then).
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (!func || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > tessera::cuda::emu::kSharedBytesPerBlockOptIn)
    return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().dynamic_shared[{current_device, func}] = static_cast<size_t>(value);
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  run_all_held_back(current_device);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  State& s = state();
  const size_t rounded = std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (unsafe_during_capture_locked()) return fail(cudaErrorStreamCaptureUnsupported);
  if (s.used[current_device] + rounded > s.capacity) return fail(cudaErrorMemoryAllocation);
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) return fail(cudaErrorMemoryAllocation);
  std::memset(p, 0xFF, rounded);  // NaN bytes: reading memory no kernel wrote shows up in results
  s.allocations.emplace(reinterpret_cast<uintptr_t>(p), Allocation{rounded, current_device});
  s.used[current_device] += rounded;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (!is_any_capture_under_way()) run_all_held_back();  // cudaFree synchronises the device
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (unsafe_during_capture_locked()) return fail(cudaErrorStreamCaptureUnsupported);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end() || it->second.device < 0) return fail(cudaErrorInvalidDevicePointer);
  s.used[it->second.device] -= it->second.bytes;
  s.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (unsafe_during_capture_locked()) return fail(cudaErrorStreamCaptureUnsupported);
  void* p = std::aligned_alloc(64, rounded);
  if (!p) return fail(cudaErrorMemoryAllocation);
  s.allocations.emplace(reinterpret_cast<uintptr_t>(p), Allocation{rounded, -1});
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (!is_any_capture_under_way()) run_all_held_back();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (unsafe_during_capture_locked()) return fail(cudaErrorStreamCaptureUnsupported);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end() || it->second.device >= 0) return fail(cudaErrorInvalidValue);
  s.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *total_bytes = s.capacity;
  *free_bytes = s.capacity - std::min(s.capacity, s.used[current_device]);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureImplicit);
  run_all_held_back();
  return copy(dst, src, bytes, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t e = check_async_copy(dst, src, bytes, kind, stream); e != cudaSuccess) return e;
  if (is_capturing(stream)) {
    enqueue_node(stream, plain("cudaMemcpyAsync", [=] { copy(dst, src, bytes, kind); }));
    return cudaSuccess;
  }
  if (const cudaError_t e = check_copy(dst, src, bytes, kind); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;  // (nothing to stage: an empty vector's data() may be null)
  // CUDA's rules for pageable host memory, which a held-back copy would otherwise read or write
  // after the host has moved on: a pageable source is staged at the call (the caller may reuse or
  // free it on return), and a copy into pageable memory returns once it has completed.
  bool pageable_src = false, pageable_dst = false;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    pageable_src = !find(src, bytes, true) && !find(src, bytes, false);
    pageable_dst = !find(dst, bytes, true) && !find(dst, bytes, false);
  }
  if (pageable_dst) {
    run_held_back(stream);
    return copy(dst, src, bytes, kind);
  }
  if (pageable_src) {
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                               static_cast<const unsigned char*>(src) + bytes);
    enqueue_node(stream, plain("cudaMemcpyAsync", [=] { std::memcpy(dst, staged->data(), bytes); }));
    return cudaSuccess;
  }
  enqueue_node(stream, plain("cudaMemcpyAsync", [=] { copy(dst, src, bytes, kind); }));
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!in_device_memory(ptr, bytes)) return fail(cudaErrorInvalidValue);
  }
  enqueue_node(stream, plain("cudaMemsetAsync", [=] { std::memset(ptr, value, bytes); }));
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  auto* created = new EmuStream;
  created->device = current_device;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  created->index = s.streams_made[current_device]++;
  created->held = created->index > 0 || configured_async();
  s.streams.push_back(created);
  *stream = created;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (is_capturing(stream)) return fail(cudaErrorStreamCaptureUnsupported);
  run_held_back(stream);
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto& live = state().streams;
    live.erase(std::remove(live.begin(), live.end(), stream), live.end());
  }
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!is_capturing(stream)) {
    run_held_back(stream);
    return cudaSuccess;
  }
  stream->capture->invalidated = true;
  return fail(cudaErrorStreamCaptureUnsupported);
}
// The waiting stream runs on only once the event's work has completed: held-back work runs now. If
// that work is still in flight (an asynchronous node), a held waiting stream gets a node that
// completes with it; any other waits here, as the device would.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  std::lock_guard<std::recursive_mutex> lock(side_mutex());
  if (reach_event(event, false)) return cudaSuccess;
  if (stream && stream->held && !is_capturing(stream))
    // What the event stands for now: it may be recorded again, or destroyed, before the node runs.
    run_or_hold(stream, {"cudaStreamWaitEvent", [on = event->stream, mark = event->mark] {
                           return Poll([on, mark] { return run_held_back(on, mark, false); });
                         }});
  else reach_event(event, true);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new EmuEvent;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  event->captured = is_capturing(stream);
  std::lock_guard<std::recursive_mutex> lock(side_mutex());
  // It completes once the work queued on the stream before it has (reach_event): at once where
  // that has all run and completed.
  event->stream = event->captured ? nullptr : stream;
  event->mark = event->stream ? stream->queued : 0;
  event->reached = false;
  if (!event->captured && (!stream || (stream->pending.empty() && !stream->inflight))) {
    event->reached = true;
    event->time_ms = host_ms();
  }
  return cudaSuccess;
}
// Waiting for or querying an event while a capture is under way is unsafe, as a synchronisation is
// (seen on an H100: a pinned allocation's event query inside a capture invalidated it); an event
// last recorded in a capture stands for no work that was queued, and cannot be waited for at all.
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  if (event->captured) return fail(cudaErrorCapturedEvent);
  reach_event(event);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (unsafe_during_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  if (event->captured) return fail(cudaErrorCapturedEvent);
  // Held-back work runs now (as if the query came late); a node still in flight is not ready.
  return reach_event(event, false) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start || !end || !ms) return fail(cudaErrorInvalidValue);
  if (!start->timing || !end->timing || start->captured || end->captured) return fail(cudaErrorInvalidResourceHandle);
  if (!start->reached || !end->reached) return fail(cudaErrorNotReady);
  *ms = static_cast<float>(end->time_ms - start->time_ms);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (!stream || stream->capture) return fail(cudaErrorInvalidValue);  // the legacy stream cannot capture
  stream->capture = std::make_unique<EmuCapture>();
  stream->capture->mode = mode;
  std::lock_guard<std::mutex> lock(state().mutex);
  state().capturing.push_back(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!is_capturing(stream)) return fail(cudaErrorIllegalState);
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto& c = state().capturing;
    c.erase(std::find(c.begin(), c.end(), stream));
  }
  std::unique_ptr<EmuCapture> capture = std::move(stream->capture);
  *graph = nullptr;
  if (capture->invalidated) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = new EmuGraph{std::move(capture->nodes)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = !is_capturing(stream)          ? cudaStreamCaptureStatusNone
            : stream->capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                           : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  std::swap(*mode, thread_capture_mode);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return fail(cudaErrorInvalidValue);
  *exec = new EmuGraphExec{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail(cudaErrorInvalidValue);
  for (const auto& node : exec->nodes) enqueue_node(stream, node);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, void* nodes, size_t* count) {
  if (!graph || nodes) return fail(cudaErrorInvalidValue);
  *count = graph->nodes.size();
  return cudaSuccess;
}

namespace tessera::cuda::emu {
void enqueue(cudaStream_t stream, std::function<void()> work, const char* label) {
  enqueue_node(stream, plain(label, std::move(work)));
}

void enqueue_async(cudaStream_t stream, const char* label, std::function<Poll()> start) {
  enqueue_node(stream, {label, std::move(start)});
}

void trace_start() {
  std::lock_guard<std::recursive_mutex> lock(side_mutex());
  tracing = true;
  trace_records.clear();
  trace_origin_ms = host_ms();
}

std::vector<TraceRecord> trace_stop() {
  run_all_held_back();
  std::lock_guard<std::recursive_mutex> lock(side_mutex());
  tracing = false;
  return std::move(trace_records);
}

size_t dynamic_shared_opt_in(const void* kernel) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.dynamic_shared.find({current_device, kernel});
  return it == s.dynamic_shared.end() ? 0 : it->second;
}

void set_device_memory_capacity(size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.capacity = bytes ? bytes : configured_capacity();
}
}  // namespace tessera::cuda::emu
