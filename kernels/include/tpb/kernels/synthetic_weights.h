// Synthetic weights: every element is a pure function of (seed, global tensor name, global
// element index), so a rank can generate only its shard, TP=1 and TP=N engines hold the
// same global model, and a CUDA kernel reproduces the CPU values bit for bit.
//
// The hash is counter based (SplitMix64's finaliser applied to key + index * golden ratio):
// no state, no sequence, any element in O(1). The name enters through FNV-1a 64, computed
// once per tensor on the host. The uniform draw takes the top 24 bits, so u is an exact
// float in [-1, 1) and the only rounding is the single multiply by the scale (no FMA can
// change it), which is what makes CPU and GPU agree exactly.
//
// Usable from CUDA: include it in a .cu file and the functions become __host__ __device__.
#pragma once

#include <cstdint>

#include "tpb/fnv1a.h"
#include "tpb/host_device.h"
#include "tpb/kernels/int4_format.h"

namespace tpb::synthetic {

// FNV-1a 64 of a NUL-terminated name (the global tensor name, e.g.
// "model.layers.3.mlp.experts.17.gate_proj.weight").
TPB_HOST_DEVICE inline std::uint64_t name_hash(const char* name) { return fnv1a64(name); }

// SplitMix64 finaliser: a bijective 64-bit mixer with full avalanche.
TPB_HOST_DEVICE inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The per-tensor key: seed and name mixed once.
TPB_HOST_DEVICE inline std::uint64_t tensor_key(std::uint64_t seed, std::uint64_t name_hash_value) {
  return mix64(seed * 0x9e3779b97f4a7c15ull ^ mix64(name_hash_value));
}

// Uniform in [-1, 1), exactly representable as float (a multiple of 2^-23).
TPB_HOST_DEVICE inline float uniform(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t h = mix64(key + (index + 1) * 0x9e3779b97f4a7c15ull);
  const std::int32_t top24 = static_cast<std::int32_t>(h >> 40);              // [0, 2^24)
  return static_cast<float>(top24 - (1 << 23)) * (1.0f / static_cast<float>(1 << 23));  // exact
}

// What the value of a tensor element is, given its uniform draw u.
enum class InitKind : std::int32_t {
  linear = 0,     // u * scale, scale = 1/sqrt(fan_in) rounded to float on the host
  norm = 1,       // 1 + u / 16: RMSNorm gains near 1
  bias = 2,       // u / 64: router correction bias, small and non-zero
  embedding = 3,  // u: embedding rows
};

TPB_HOST_DEVICE inline float value(InitKind kind, float scale, std::uint64_t key, std::uint64_t index) {
  const float u = uniform(key, index);
  switch (kind) {
    case InitKind::linear: return u * scale;
    case InitKind::norm: return 1.0f + u * 0.0625f;       // the product is exact, so an FMA rounds the same
    case InitKind::bias: return u * 0.015625f;            // exact: power-of-two scale
    case InitKind::embedding: return u;
  }
  return 0.0f;
}

// Synthetic INT4 weights (the format of tpb/kernels/int4_format.h), for a model whose routed
// experts are INT4: q of global element `index` is the top 4 bits of its hash less 8 (uniform
// on [-8, 7], the format's whole range); the scale of global group `group_index` (row x groups
// per row + column / 32) is bf16(scale / 8 x (0.75 + 0.25 u)) from a second key, so |q x
// scale| stays below the bf16 rule's bound of `scale`. The weight is then int4::dequant(q,
// scale): the exact value the loader reads from a checkpoint holding these q and scales.
TPB_HOST_DEVICE inline int int4_q(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t h = mix64(key + (index + 1) * 0x9e3779b97f4a7c15ull);
  return static_cast<int>(h >> 60) - 8;
}

TPB_HOST_DEVICE inline std::uint16_t int4_scale_bits(std::uint64_t key, std::uint64_t group_index, float scale) {
  const float u = uniform(mix64(key ^ 0x5ca1e5ca1e5ca1e5ull), group_index);
  const float s = (scale * 0.125f) * (0.75f + 0.25f * u);  // one rounding per step, FMA or not
  return int4::round_to_bf16_bits(s);
}

}  // namespace tpb::synthetic
