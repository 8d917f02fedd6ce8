// The emulator's host side: the subset of the CUDA runtime API that Tessera's backend calls
// (devices, memory, copies, streams, events), under CUDA's own names, so the backend's host code
// (cuda/*.cpp) is one source for the real runtime and for the emulator. Emulated device memory is
// host memory, fresh allocations are filled with NaN bytes (a kernel that reads what it never
// wrote shows it), and every copy checks that its device pointers lie inside live allocations of
// the right kind (a host pointer passed as a device pointer is an error, not a silent read).
// A device's first stream (the one Tessera queues all its work on) runs its work at once, in
// order, on the calling thread. Any other stream of the device (a side stream: copies beside the
// work, ops/upload.h) holds its work back and runs it as late as CUDA may: when something waits
// for it (cudaStreamWaitEvent or cudaEventSynchronize/Query on an event recorded after it,
// cudaStreamSynchronize, cudaDeviceSynchronize, cudaFree/cudaFreeHost, a synchronous copy), so
// that a missing wait shows as a result computed from stale memory instead of passing by luck.
// While a stream captures a graph (cudaStreamBeginCapture) its work is recorded, not run, and
// runs in order at each cudaGraphLaunch. The rules of capture that a real GPU enforces are enforced here too: a
// synchronisation of the capturing stream, a synchronous copy, an allocation or an event query or
// wait in a thread whose capture mode is not relaxed fails and invalidates the capture (every
// capture, as in CUDA's global mode, whichever thread calls), and an asynchronous copy that
// the graph records must not read or write pageable host memory (which a replay could not see).
//
// Each device is an sm_90 (H100/H200) as far as a launch can tell: a block may use 48 KB of shared
// memory, and up to 227 KB once its kernel opts in with cudaFuncSetAttribute(kernel,
// cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) on that device; a launch beyond what its kernel
// may use fails naming the kernel (cuda/emu/simt.cpp), as it does on a GPU.
//
// A node may also complete later than it starts (enqueue_async: the NCCL reference's collectives,
// which wait for their peers): the stream's later work waits for it, a query of an event recorded
// after it says cudaErrorNotReady until it completes, and a synchronisation blocks until then.
//
// Configuration: TESSERA_EMU_DEVICES (default 1) emulated devices of TESSERA_EMU_MEMORY_MB
// (default 16384) MiB each; TESSERA_EMU_ASYNC=1 holds back the first stream's work too, as a GPU
// runs behind the host, so that a stream reading another's results without waiting for them reads
// them unfinished (the multi-rank tests run so: docs/distributed.md).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorNotReady = 600,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorCapturedEvent = 907,
};

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

struct EmuStream;
struct EmuEvent;
using cudaStream_t = EmuStream*;
using cudaEvent_t = EmuEvent*;
struct EmuGraph;
struct EmuGraphExec;
using cudaGraph_t = EmuGraph*;
using cudaGraphExec_t = EmuGraphExec*;

constexpr unsigned cudaStreamNonBlocking = 1;
constexpr unsigned cudaEventDefault = 0;
constexpr unsigned cudaEventDisableTiming = 2;

// CUDA's values, for the attributes the backend asks for.
enum cudaDeviceAttr {
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int multiProcessorCount;
  int maxThreadsPerBlock;
  int warpSize;
  int major, minor;
};

const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
// Of the current device's copy of `func` (a kernel), as CUDA's: MaxDynamicSharedMemorySize alone.
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
// The host's milliseconds between the two events' completion (the emulator's work runs on the host),
// as CUDA's rules have it: both recorded outside a capture, with timing, and complete.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, void* nodes, size_t* count);  // count only: nodes must be null

namespace tessera::cuda::emu {
// Shared memory per block: what every kernel may use (its static arrays and its launch's dynamic
// bytes together), and the most a kernel may opt in to (sm_90's cudaDevAttrMaxSharedMemoryPerBlockOptin).
constexpr size_t kSharedBytesPerBlock = 48 * 1024;
constexpr size_t kSharedBytesPerBlockOptIn = 232448;
// The cudaFuncAttributeMaxDynamicSharedMemorySize that `kernel` has been given on the current
// device, or 0 where none has.
size_t dynamic_shared_opt_in(const void* kernel);
// Sets the emulated capacity of every device (tests of the out-of-memory path); 0 restores the
// configured default.
void set_device_memory_capacity(size_t bytes);
// Queues `work` on `stream` as one node: runs it now (or holds it back), or records it into the
// graph the stream is capturing. Kernel launches (cuda/launch.h) and the CPU references of
// cuBLASLt and cuDNN go through here; `label` names the node in the trace.
void enqueue(cudaStream_t stream, std::function<void()> work, const char* label = "work");
// Says whether an asynchronous node has completed (never blocks).
using Poll = std::function<bool()>;
// Queues a node that completes asynchronously: `start` runs in stream order, begins the work and
// returns its Poll (or an empty one when the work is already done).
void enqueue_async(cudaStream_t stream, const char* label, std::function<Poll()> start);
// The order in which the nodes ran: one record per node started while a trace is taken, with the
// host's milliseconds since trace_start() at its start and end (an asynchronous node ends when it
// completes).
struct TraceRecord {
  int device;
  int stream;  // 0: the device's first stream, then in order of creation
  std::string label;
  double start_ms, end_ms;
};
void trace_start();
// Runs every stream's held-back work to completion and returns the records.
std::vector<TraceRecord> trace_stop();
}  // namespace tessera::cuda::emu
