// How many loader workers and how many batches in flight a machine wants, when the user leaves it
// to Tessera (`--workers -1`, the default of train and validate; LoaderOptions::workers = -1, prefetch = 0).
//
//   feeding a GPU   workers = cores - 1 (at most 32): the main thread only queues the device's work,
//                   and a GPU wants a few thousand images/s, ~2 ms of one core each at 224 px
//                   (docs/benchmarks.md, the input pipeline), so every core but one decodes;
//   on the CPU      workers = cores / 4, between 1 and 4: the step's own threads use every core,
//                   and a model step costs far more per image than its decode (coat_lite_tiny at
//                   224 px: ~50 ms against ~2 ms), so a few workers keep ahead;
//   prefetch        batches each worker may run ahead: enough that at least 4 batches are in
//                   flight (one slow image does not stall a step), at most 4 per worker, and fewer
//                   when the batches in flight would pass 2 GiB (they sit in pinned memory when
//                   bound for a GPU).
// The pinned staging buffers follow: the pinned allocator (cuda/memory.cpp) hands each batch in
// flight its own block and reuses it once the batch's copy is done, so after the first
// workers * prefetch + 2 batches no new pinned memory is allocated.
// `cores`: the cores this process may run on (its CPU affinity, as taskset, Slurm and mpirun's
// binding set it), counted by usable_cores().
#pragma once
#include <cstdint>

namespace tessera::data {

int auto_workers(int cores, bool feeds_gpu);
// For `workers` workers (0: inline, 1 is returned) and batches of `batch_bytes`.
int auto_prefetch(int workers, int64_t batch_bytes);

// The cores in this process's CPU affinity mask (at least 1).
int usable_cores();

}  // namespace tessera::data
