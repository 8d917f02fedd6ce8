// Declarations of the CUDA kernels, one per kernel table (ops/kernels/registry.h), generated from
// the registry's one list as the CPU's are (ops/cpu/kernels.h): cuda::name has the table's signature
// and is defined in cuda/kernels/<family>.cu. The backend fills every table's CUDA slot from these
// (cuda/backend.cpp), so a table whose CUDA kernel is missing, or defined with another signature,
// fails the link of the CUDA builds instead of leaving an empty slot for a test to skip.
#pragma once
#include "tessera/ops/kernels/registry.h"

namespace tessera::cuda {

#define TS_DECLARE_CUDA_KERNEL(name, Signature, family, serves) Signature name;
TESSERA_KERNEL_TABLES(TS_DECLARE_CUDA_KERNEL)
#undef TS_DECLARE_CUDA_KERNEL

}  // namespace tessera::cuda
