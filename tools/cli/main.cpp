// The `tessera` program (build/bin/tessera): the command line of tools/cli/dispatch.cpp.
#include <malloc.h>

#include "tools/cli/commands.h"

int main(int argc, char** argv) {
  // The input pipeline allocates a few buffers of 100 KB - 1 MB per image (the decoded region, the
  // crop, RandAugment's intermediates). With glibc's defaults the worker threads' arenas give that
  // memory back to the kernel and fault it in again, about 140 page faults per image (`bench-data`:
  // 172,000 faults in a run of 1 s per stage, 669,000 at 4 s). Served below 32 MiB from the heap,
  // which is trimmed only past 16 MiB free, the buffers stay in the process: 5,400 and 6,800 faults
  // (docs/benchmarks.md, the input pipeline). A program that links libtessera sets its own policy
  // (mallopt, or glibc's MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
  return tessera::cli::main(argc, argv);
}
