// How a CUDA kernel family fills its slots of the kernel tables (ops/kernels/registry.h):
//   TS_REGISTER_CUDA_KERNELS(elementwise) {
//     unary_kernel.set(DeviceType::CUDA, unary);
//     ...
//   }
// at the end of cuda/kernels/elementwise.cu. The body runs once at program start (the tables are
// constant-initialised, so they exist before any registration runs).
#pragma once
#include "tessera/core/dispatch.h"

#define TS_REGISTER_CUDA_KERNELS(family)                          \
  namespace {                                                     \
  struct Register_##family {                                      \
    Register_##family();                                          \
  } register_##family;                                            \
  }                                                               \
  Register_##family::Register_##family()
