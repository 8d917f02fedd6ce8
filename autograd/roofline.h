// A roofline model of one GPU, for the profiler's "model" column: the least time the GPU's
// datasheet peaks allow a kernel call, from the FLOPs it does, the bytes its operands span and the
// launches it makes. A model, never a measurement: it tells where a step's time must go at best
// (bandwidth-bound element-wise kernels, GEMMs at tensor-core peak, launch overhead) on a machine
// without that GPU, and how a change moves it. docs/benchmarks.md has the constants' sources.
#pragma once
#include <cstdint>

namespace tessera {

struct GpuModel {
  const char* name;
  double half_tflops;  // dense bf16/fp16 tensor-core peak
  double tf32_tflops;  // dense TF32 tensor-core peak (float32 GEMMs with allow_tf32)
  double fp32_tflops;  // float32 without tensor cores
  double memory_tb_s;  // HBM bandwidth, 1e12 bytes a second
  double launch_us;    // a kernel launch's cost in an eager step (host and device together)
};

// NVIDIA H100 SXM5 80 GB (the lent machines' GPU).
const GpuModel& h100_sxm();

// A call's modelled time in its parts: FLOPs over the peak its narrowest operand selects (2-byte:
// half; 4-byte: TF32 if allowed, else fp32), bytes over bandwidth, and its launches. The first two
// grow with the batch, the launches do not (bench/roofline.py extrapolates them apart).
struct RooflineTime {
  double compute_us = 0, memory_us = 0, launch_us = 0;
  double total_us() const;  // the larger of compute and memory, plus the launches
  RooflineTime& operator+=(const RooflineTime& other);
};

RooflineTime roofline(const GpuModel& gpu, double flops, double bytes, int64_t launches, int64_t narrowest_element,
                      bool tf32);

}  // namespace tessera
