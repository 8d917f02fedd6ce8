#include "tessera/core/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "tessera/core/backend.h"
#include "tessera/core/levers.h"

namespace tessera {

namespace {

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

// XCR0: which register states the OS saves on a context switch (valid only with OSXSAVE).
uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::string brand_string() {
  if (cpuid(0x80000000).a < 0x80000004) return "";
  char text[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const Regs r = cpuid(0x80000002 + i);
    const unsigned words[4] = {r.a, r.b, r.c, r.d};
    std::memcpy(text + 16 * i, words, 16);
  }
  std::string s(text);
  const size_t first = s.find_first_not_of(' '), last = s.find_last_not_of(' ');
  return first == std::string::npos ? "" : s.substr(first, last - first + 1);
}

CpuFeatures read_features() {
  CpuFeatures f;
  const unsigned max_leaf = cpuid(0).a;
  const Regs l1 = cpuid(1);
  const unsigned base_family = (l1.a >> 8) & 0xf, base_model = (l1.a >> 4) & 0xf;
  f.family = static_cast<int>(base_family == 0xf ? base_family + ((l1.a >> 20) & 0xff) : base_family);
  f.model = static_cast<int>(base_family >= 0x6 ? base_model | (((l1.a >> 16) & 0xf) << 4) : base_model);
  f.brand = brand_string();
  if (!bit(l1.c, 27) || max_leaf < 7) return f;  // no OSXSAVE: the OS saves no AVX state
  const uint64_t saved = xcr0();
  const bool avx_state = (saved & 0x6) == 0x6;                    // SSE and AVX halves
  const bool avx512_state = avx_state && (saved & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool amx_state = (saved & 0x60000) == 0x60000;            // XTILECFG, XTILEDATA
  const Regs l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
  f.avx2 = avx_state && bit(l1.c, 28) && bit(l7.b, 5);
  f.fma = avx_state && bit(l1.c, 12);
  f.avx512f = avx512_state && bit(l7.b, 16);
  f.avx512bw = f.avx512f && bit(l7.b, 30);
  f.avx512vl = f.avx512f && bit(l7.b, 31);
  f.avx512dq = f.avx512f && bit(l7.b, 17);
  f.avx512_bf16 = f.avx512f && bit(l7s1.a, 5);
  f.amx_bf16 = amx_state && bit(l7.d, 22) && bit(l7.d, 24);
  return f;
}

std::string vector_isa(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return "avx512";
  if (f.avx2 && f.fma) return "avx2";
  return "x86-64";
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = read_features();
  return features;
}

bool cpu_bf16_native() {
  const CpuFeatures& f = cpu_features();
  return f.avx512_bf16 && f.avx512bw && f.avx512vl && f.avx512dq && levers().cpu_bf16_native;
}

std::string cpu_isa_for(bool bfloat16) {
  const CpuFeatures& f = cpu_features();
  if (!bfloat16) return vector_isa(f);
  if (cpu_bf16_native()) return f.amx_bf16 ? "amx_bf16" : "avx512_bf16";
  return "portable (" + vector_isa(f) + ")";
}

std::string instruction_set(Device device, bool bfloat16) {
  if (device.is_cpu()) return cpu_isa_for(bfloat16);
  DeviceBackend* backend = find_backend(device.type);
  return backend ? backend->description() : device.str();
}

std::string cpu_description() {
  const CpuFeatures& f = cpu_features();
  std::string s = (f.brand.empty() ? std::string("x86-64 CPU") : f.brand) + " (family " + std::to_string(f.family) +
                  " model " + std::to_string(f.model) + "):";
  const std::pair<const char*, bool> flags[] = {{"avx2", f.avx2},         {"fma", f.fma},
                                                {"avx512f", f.avx512f},   {"avx512bw", f.avx512bw},
                                                {"avx512vl", f.avx512vl}, {"avx512_bf16", f.avx512_bf16},
                                                {"amx_bf16", f.amx_bf16}};
  for (const auto& [name, on] : flags)
    if (on) s += std::string(" ") + name;
  return s;
}

}  // namespace tessera
