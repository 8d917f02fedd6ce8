// Kernel interface of random tensor creation (internal), and the draws themselves, shared by the
// CPU and CUDA kernels so that a seed gives the same values on every device.
//
// Draw i of a request is a pure function of (seed, counter first + i) through Philox4x32-10
// (core/philox.h): 53 random bits make a uniform double in [0, 1); a normal is Box-Muller on two
// uniforms of the same counter; a truncated normal is the inverse CDF of a uniform. Values are
// computed in float64 and rounded once to the output's dtype. Uniforms are bit-identical on every
// device; normals go through log/cos/sqrt, whose device implementations may differ from the host's
// libm in the last bit.
#pragma once
#include <cmath>
#include <cstdint>

#include "tessera/core/dispatch.h"
#include "tessera/core/philox.h"
#include "tessera/core/tensor.h"

namespace tessera {

enum class RandomKind : uint8_t { Uniform, Normal, TruncNormal };

struct RandomParams {
  RandomKind kind = RandomKind::Uniform;
  uint64_t seed = 0;
  uint64_t first = 0;  // counter of element 0
  // Inside a CUDA Graph: {seed, offset} in device memory, rewritten before each replay; the kernel
  // draws with that seed from counter offset + first (Generator::reserve_for_kernel).
  const uint64_t* replayed_stream = nullptr;
  // TruncNormal: x = mean + std·√2·erfinv(lo + (hi − lo)·u), clamped to [a, b], where [lo, hi] is
  // the image of [a, b] under 2Φ((x − mean)/std) − 1 (computed once, on the host).
  double mean = 0.0, std = 1.0, a = -2.0, b = 2.0, lo = -1.0, hi = 1.0;
};

// out[i] = draw(params, params.first + i); out contiguous, float32 or float64.
using RandomKernel = void(const RandomParams& params, const Tensor& out);

namespace random_draw {

constexpr double kTwoPi = 6.283185307179586476925;

// 53 random bits as a double in [0, 1).
TS_HOST_DEVICE inline double unit(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1.0p-53;
}

TS_HOST_DEVICE inline double uniform(uint64_t seed, uint64_t counter) {
  const auto w = philox4x32(counter, seed);
  return unit(w[0], w[1]);
}

TS_HOST_DEVICE inline double normal(uint64_t seed, uint64_t counter) {
  const auto w = philox4x32(counter, seed);
  const double u1 = 1.0 - unit(w[0], w[1]);  // (0, 1]: log stays finite
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(kTwoPi * unit(w[2], w[3]));
}

// Inverse error function: Giles' approximation (2010), relative error below 4e-7 — ample for
// drawing initial weights, which are float32 anyway, and several times faster than refining it.
TS_HOST_DEVICE inline double erfinv(double y) {
  if (y <= -1.0) return -INFINITY;
  if (y >= 1.0) return INFINITY;
  double w = -::log((1.0 - y) * (1.0 + y));
  if (w < 5.0) {
    w -= 2.5;
    const double c[] = {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                        -0.00125372503, -0.00417768164, 0.246640727,     1.50140941};
    double p = 2.81022636e-08;
    for (double k : c) p = k + p * w;
    return p * y;
  }
  w = ::sqrt(w) - 3.0;
  const double c[] = {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                      -0.0076224613,  0.00943887047, 1.00167406,     2.83297682};
  double p = -0.000200214257;
  for (double k : c) p = k + p * w;
  return p * y;
}

// The params a kernel draws with: a graph's replay reads its seed and offset where they were left.
TS_HOST_DEVICE inline RandomParams resolve_stream(RandomParams p) {
  if (p.replayed_stream) {
    p.seed = p.replayed_stream[0];
    p.first += p.replayed_stream[1];
    p.replayed_stream = nullptr;
  }
  return p;
}

TS_HOST_DEVICE inline double draw(const RandomParams& p, uint64_t counter) {
  switch (p.kind) {
    case RandomKind::Uniform: return uniform(p.seed, counter);
    case RandomKind::Normal: return normal(p.seed, counter);
    case RandomKind::TruncNormal: {
      const double x = p.mean + p.std * 1.4142135623730950488 * erfinv(p.lo + (p.hi - p.lo) * uniform(p.seed, counter));
      return x < p.a ? p.a : (x > p.b ? p.b : x);
    }
  }
  return 0.0;
}

}  // namespace random_draw

}  // namespace tessera
