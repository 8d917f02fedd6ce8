// Entry point of the CUDA backend: installs the device allocator and the host<->device transfer
// kernels, and (as CUDA kernels are written) fills the CUDA slots of the ops' KernelTables.
// Called once, on first use of a CUDA device (core/storage.cpp).
#pragma once

namespace tessera::cuda {

void register_backend();

}  // namespace tessera::cuda
