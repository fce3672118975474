// The head widths the GPU MLA attention kernels hold in registers and shared memory, with no
// CUDA: the kernels size their tiles and validate shapes with them, and the engine's
// configuration check (reference_engine/memory/attention_widths.h) refuses a model beyond
// them before anything is allocated.
#pragma once

#include <cstdint>

namespace tpb::kernels {

// Decode (tpb/kernels/gpu/mla_decode.h): the latent cache row, kv_lora + rope.
inline constexpr std::int64_t kMlaDecodeMaxKvLora = 512;
inline constexpr std::int64_t kMlaDecodeMaxRope = 128;
// Prefill (tpb/kernels/gpu/mla_prefill.h): nope + rope of q and k, and v.
inline constexpr std::int64_t kMlaPrefillMaxQk = 256;
inline constexpr std::int64_t kMlaPrefillMaxV = 128;

}  // namespace tpb::kernels
