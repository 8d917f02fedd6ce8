// bench_load: the time and memory of loading one weights file (a torch.save checkpoint or
// safetensors) into tensors, as every command that takes --weights does (io/weights_file.h).
// bench/bench_load.py does the same with torch.load(weights_only=True); scripts/bench_load.sh runs
// the two alternately on one file and prints the table of docs/interop.md.
//
//   bench_load FILE     prints one JSON object: seconds, tensors, bytes of tensor data, the
//                       resident memory before the load and its high-water mark after (MiB)
//
// Run once per process: the high-water mark (VmHWM) cannot be reset.
#include <chrono>
#include <cstdio>

#include "tessera/core/process_memory.h"
#include "tessera/io/json.h"
#include "tessera/io/weights_file.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_load FILE\n");
    return 2;
  }
  try {
    constexpr double kMiB = 1024.0 * 1024.0;
    const int64_t rss_before = tessera::resident_bytes();
    const auto start = std::chrono::steady_clock::now();
    const tessera::nn::NamedTensors weights = tessera::load_weights_file(argv[1]);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t bytes = 0;
    for (const auto& [name, t] : weights) bytes += t.numel() * static_cast<int64_t>(t.element_size());
    tessera::json::Writer w;
    w.begin_object().key("side").value("tessera").key("seconds").value(seconds);
    w.key("tensors").value(static_cast<int64_t>(weights.size())).key("bytes").value(bytes);
    w.key("rss_before_mib").value(static_cast<double>(rss_before) / kMiB);
    w.key("peak_rss_mib").value(static_cast<double>(tessera::peak_resident_bytes()) / kMiB).end_object();
    std::puts(w.str().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_load: %s\n", e.what());
    return 1;
  }
  return 0;
}
