// A counter-based normal generator: value `index` of stream (seed, stream) is a pure function
// of the three, so any backend (host loop, GPU thread) draws the same weights in any order —
// up to the last bit of the platform's logf/cosf, which can flip a rare bf16 rounding.
// SplitMix64 finalisers give two uniforms; Box-Muller turns them into one N(0, 1) draw.
#ifndef DITUNE_EXECUTOR_RANDOM_HASH_H_
#define DITUNE_EXECUTOR_RANDOM_HASH_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DITUNE_HOST_DEVICE __host__ __device__
#else
#define DITUNE_HOST_DEVICE
#endif

namespace ditune::exec {

DITUNE_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// N(0, 1), computed in fp32 from 24-bit uniforms in (0, 1].
DITUNE_HOST_DEVICE inline float RandomNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t base = Mix64(seed * 0x9E3779B97F4A7C15ULL + Mix64(stream)) + 2 * index;
  const float u1 = static_cast<float>((Mix64(base) >> 40) + 1) * (1.0f / 16777216.0f);
  const float u2 = static_cast<float>(Mix64(base + 1) >> 40) * (1.0f / 16777216.0f);
  const float r = sqrtf(-2.0f * logf(u1));
  return r * cosf(6.28318530717958647692f * u2);
}

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_RANDOM_HASH_H_
