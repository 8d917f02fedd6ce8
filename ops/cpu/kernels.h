// Declarations of the CPU kernels, one per kernel table (ops/kernels/registry.h): cpu::name has the
// table's signature and is defined in ops/cpu/<family>.cpp. The tables take their CPU slot from
// these at compile time (ops/cpu/tables.cpp).
#pragma once
#include "tessera/ops/kernels/registry.h"

namespace tessera::cpu {

#define TS_DECLARE_CPU_KERNEL(name, Signature, family, serves) Signature name;
TESSERA_KERNEL_TABLES(TS_DECLARE_CPU_KERNEL)
#undef TS_DECLARE_CPU_KERNEL

}  // namespace tessera::cpu
