// What this CPU can run, read once from CPUID and the OS's saved-state mask (XCR0), so that a
// portable build picks its fastest kernels at run time: the bfloat16 conversions and GEMMs of
// autocast on the CPU (core/autocast.h) use the CPU's own bfloat16 instructions where it has them
// and a portable path of the same results where it has not.
//
//   avx512_bf16  VCVTNE2PS2BF16 (two float32 vectors to one of bfloat16, round to nearest even) and
//                VDPBF16PS (bfloat16 pair dot products into float32): Intel Cooper Lake and later
//                Xeons, AMD Zen 4 and Zen 5.
//   amx_bf16     AMX tiles with bfloat16 TDPBF16PS: Intel Sapphire Rapids and later Xeons.
//
// A feature counts only when the OS saves its registers (XCR0): a VM or kernel that masks AVX-512
// state makes the CPU report the instructions, and using them would fault.
#pragma once
#include <string>

#include "tessera/core/device.h"

namespace tessera {

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;  // AVX-512 as Skylake-X has it
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  std::string brand;          // CPUID's brand string ("AMD EPYC 9575F 64-Core Processor"), trimmed
  int family = 0, model = 0;  // CPUID's display family and model (Zen 5: family 26)
};

// This CPU's features (read on first call).
const CpuFeatures& cpu_features();

// Whether bfloat16 work on the CPU runs on the CPU's own instructions: avx512_bf16 (with AVX-512BW,
// VL and DQ, which the conversions also use; every such CPU has them), unless
// TESSERA_CPU_BF16_NATIVE=0 (core/levers.h) asks for the portable path. (AMX without AVX-512 BF16
// exists on no CPU: Sapphire Rapids and later have both.)
bool cpu_bf16_native();

// The instruction set the CPU kernels use for a dtype, for logs and benchmark records: for bfloat16
// "amx_bf16", "avx512_bf16" or "portable (avx512)" / "portable (avx2)" / "portable (x86-64)"; for
// float32 and float64 "avx512", "avx2" or "x86-64".
std::string cpu_isa_for(bool bfloat16);

// The instruction set a run on `device` computes with, for logs and records: on the CPU
// cpu_isa_for(bfloat16), on another device its backend's description ("SIMT emulator (CPU)",
// "CUDA 13.0, NVIDIA H100 80GB HBM3").
std::string instruction_set(Device device, bool bfloat16);

// One line for logs: "AMD EPYC (family 26 model 2): avx2 fma avx512f avx512bw avx512vl avx512_bf16".
std::string cpu_description();

}  // namespace tessera
