// The kernel tables, defined from the one list (ops/kernels/registry.h). Each is constant-
// initialised with its CPU kernel, so no static-initialisation order can observe a half-made table
// and a device backend's registration (which runs at program start) only fills its own slot. The
// definitions live with the CPU kernels, the backend every build has, so the kernel interfaces
// (ops/kernels/) never include a backend.
#include "tessera/ops/cpu/kernels.h"

namespace tessera {

#define TS_DEFINE_TABLE(name, Signature, family, serves) \
  constinit KernelTable<Signature> name##_kernel{#name, cpu::name};
TESSERA_KERNEL_TABLES(TS_DEFINE_TABLE)
#undef TS_DEFINE_TABLE

// Transfers between the host and a device have no CPU kernel: the device backend supplies both.
constinit KernelTable<TransferKernel> to_device_kernel{"to_device", nullptr};
constinit KernelTable<TransferKernel> to_host_kernel{"to_host", nullptr};

const std::vector<KernelTableInfo>& kernel_tables() {
#define TS_TABLE_INFO(name, Signature, family, serves) \
  KernelTableInfo{#name, family, serves, [](DeviceType t) { return name##_kernel.has(t); }},
  static const std::vector<KernelTableInfo> tables{TESSERA_KERNEL_TABLES(TS_TABLE_INFO)};
#undef TS_TABLE_INFO
  return tables;
}

}  // namespace tessera
