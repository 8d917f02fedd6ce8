// The roofline model of autograd/roofline.h.
#include "tessera/autograd/roofline.h"

#include <algorithm>

namespace tessera {

const GpuModel& h100_sxm() {
  // NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16/FP16 1,979 and TF32 989 TFLOPS with 2:4
  // sparsity, so half that dense; FP32 67 TFLOPS; HBM3 3.35 TB/s. The launch cost is an assumption,
  // not a datasheet figure: a launch from the host is commonly quoted at 2-5 us, 4 taken here (what
  // CUDA Graphs remove; a GPU run can replace it with what it measures).
  static const GpuModel gpu{"H100 SXM5 (model)", 989.5, 494.7, 66.9, 3.35, 4.0};
  return gpu;
}

double RooflineTime::total_us() const { return std::max(compute_us, memory_us) + launch_us; }

RooflineTime& RooflineTime::operator+=(const RooflineTime& other) {
  compute_us += other.compute_us;
  memory_us += other.memory_us;
  launch_us += other.launch_us;
  return *this;
}

RooflineTime roofline(const GpuModel& gpu, double flops, double bytes, int64_t launches, int64_t narrowest_element,
                      bool tf32) {
  const double tflops = narrowest_element == 2 ? gpu.half_tflops : tf32 ? gpu.tf32_tflops : gpu.fp32_tflops;
  return {flops / (tflops * 1e6), bytes / (gpu.memory_tb_s * 1e6), static_cast<double>(launches) * gpu.launch_us};
}

}  // namespace tessera
