// The cores' float32 peak in GFLOP/s on `threads` threads, the roofline the benchmarks compare a
// GEMM with (bench/bench_kernels.cpp, bench/gemm_libraries.cpp): each thread runs 12 independent
// chains of 16-float fused multiply-adds (AVX-512: one register each; AVX2: two), more than FMA
// latency x issue width on current x86 cores, so the chains never wait. Best of 5 runs of ~0.1 s.
#pragma once
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

inline double fma_peak_gflops(int threads) {
  using V16 = float __attribute__((vector_size(64)));
  constexpr int kChains = 12;
  constexpr int64_t kIters = 2'000'000;
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      V16 acc[kChains];
      for (int c = 0; c < kChains; ++c) acc[c] = V16{} + 0.001f * static_cast<float>(c + omp_get_thread_num());
      const V16 mul = V16{} + 0.999999f, add = V16{} + 1e-7f;
      for (int64_t i = 0; i < kIters; ++i)
        for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * mul + add;  // contracted to one FMA
      for (int c = 0; c < kChains; ++c)
        for (int l = 0; l < 16; ++l) sink += acc[c][l];
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sink == 42.0f) std::printf(" ");  // keeps the chains alive
    best = std::max(best, 2.0 * 16 * kChains * kIters * threads / s / 1e9);
  }
  return best;
}
