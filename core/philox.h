// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a
// counter-based generator. Draw i of a stream is a pure function of (key, counter i), so a tensor
// can be filled in parallel, on any device, with the same values whatever the thread count.
#pragma once
#include <array>
#include <cstdint>

#include "tessera/core/host_device.h"

namespace tessera {

TS_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;    // round multipliers
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0], p1 = static_cast<uint64_t>(kMul1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k = {k[0] + kWeyl0, k[1] + kWeyl1};
  }
  return c;
}

// A 64-bit counter (the two high words zero) under a 64-bit key.
TS_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32(uint64_t counter, uint64_t key) {
  return philox4x32({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u},
                    {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
}

}  // namespace tessera
