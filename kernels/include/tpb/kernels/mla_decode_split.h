// How the GPU decode attention (tpb/kernels/gpu/mla_decode.h) cuts its work, as a pure
// function of the shape and the device's resident CTAs, with no CUDA: the kernel launches and
// sizes its workspace with it, and the memory planner (reference_engine/memory/
// engine_buffers.h) predicts that workspace with the same code.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tpb::kernels {

constexpr std::int64_t kMlaDecodeTileKeys = 64;      // cache rows per pipeline stage
constexpr std::int64_t kMlaDecodeHeadsPerCta = 32;   // mma.sync kernel: two 16-head MMA row tiles
constexpr std::int64_t kMlaDecodeMaxSplits = 256;

// The wgmma kernel (Hopper) takes the DeepSeek-V3 / Kimi-K2.5 row only, with every head of a
// group of 64 as the MMA's M dimension (fewer heads are padded); other widths take mma.sync.
// The planner assumes a build with sm_90a code (the default architectures): one built without
// it runs mma.sync at every width, whose plan has fewer splits and so a smaller workspace.
constexpr std::int64_t kMlaDecodeWgmmaKvLora = 512;
constexpr std::int64_t kMlaDecodeWgmmaRope = 64;
constexpr std::int64_t kMlaDecodeWgmmaHeadsPerCta = 64;
// Up to this many heads, the wgmma kernel with the heads as the MMA's N dimension
// (wgmma_heads_n: 8, 16 or 32 per CTA) takes the row instead; one head group, as the
// 64-head kernel's, so the plan and the workspace are the same.
constexpr std::int64_t kMlaDecodeHeadsNMax = 32;

inline bool mla_decode_wgmma_shape(std::int64_t kv_lora, std::int64_t rope) {
  return kv_lora == kMlaDecodeWgmmaKvLora && rope == kMlaDecodeWgmmaRope;
}

// CTAs per (split, sequence). mma.sync: heads in groups of at most 32, balanced (48 heads run
// as 32 + 16); wgmma: groups of 64.
inline std::int64_t mla_decode_head_groups(std::int64_t heads, bool wgmma) {
  if (wgmma) return (heads + kMlaDecodeWgmmaHeadsPerCta - 1) / kMlaDecodeWgmmaHeadsPerCta;
  const std::int64_t row_tiles = (heads + 15) / 16, per_cta = kMlaDecodeHeadsPerCta / 16;
  return (row_tiles + per_cta - 1) / per_cta;
}

// Cache tiles of a context of max_len keys, and the splits when each holds tiles_per_split of
// them (the last one fewer).
inline std::int64_t mla_decode_tiles(std::int64_t max_len) {
  return (max_len + kMlaDecodeTileKeys - 1) / kMlaDecodeTileKeys;
}
inline std::int64_t mla_decode_splits_of(std::int64_t max_len, std::int64_t tiles_per_split) {
  return (mla_decode_tiles(max_len) + tiles_per_split - 1) / tiles_per_split;
}

struct MlaDecodeSplit {
  std::int64_t splits = 1;
  std::int64_t chunk = kMlaDecodeTileKeys;  // keys per split, a multiple of the tile
};

// Splits of whole tiles, chosen for the shortest time by a two-term model: the waves of
// `slots` resident CTAs times the tiles each CTA reads, plus the fp32 partial outputs every
// split writes and the merge reads back (partial_rows = batch x heads rows of kv_lora floats
// per split). One split's 64 partial rows (128 KB at kv_lora 512, out and back) count as 1/32
// of a tile's time, for either kernel: the fit of a sweep of tiles per split on one H200
// (wgmma kernel, kv_lora 512, batch 1 and 8, 8K and 32K: 2.2 us per tile a CTA reads, 0.075 us
// per split of 64 heads), which overcounts narrower rows. Without the second term, batch
// 1 x 8K took one-tile splits, 128 of them, whose partials are 1.8 x the cache they summarise:
// 21.2 us against 18.1 us at two tiles. Split counts go up to twice what fills the device once;
// ties go to fewer splits; work = batch x head groups. A function of (max_len, work, slots,
// partial_rows) only, so workspace size and launch agree and a graph captured at any seq_lens
// stays valid.
inline MlaDecodeSplit mla_decode_split(std::int64_t max_len, std::int64_t work, std::int64_t slots,
                                       std::int64_t partial_rows) {
  constexpr std::int64_t kPartialRowsPerTile = 32 * 64;  // a tile's time, in partial rows
  MlaDecodeSplit p;
  const std::int64_t max_tiles = mla_decode_tiles(max_len);
  const std::int64_t cap = std::min<std::int64_t>(
      {kMlaDecodeMaxSplits, max_tiles, std::max<std::int64_t>(1, (2 * slots + work - 1) / work)});
  std::int64_t best_cost = -1;
  for (std::int64_t want = 1; want <= cap; ++want) {
    const std::int64_t tiles_per_split = (max_tiles + want - 1) / want;
    const std::int64_t splits = mla_decode_splits_of(max_len, tiles_per_split);
    const std::int64_t waves = (work * splits + slots - 1) / slots;
    const std::int64_t cost = kPartialRowsPerTile * waves * tiles_per_split + partial_rows * splits;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      p.chunk = tiles_per_split * kMlaDecodeTileKeys;
      p.splits = splits;
    }
  }
  return p;
}

// The plan of `batch` sequences of `heads` heads on the kernel `wgmma` says, with `slots`
// resident CTAs: the one call both the launch and the memory planner make.
inline MlaDecodeSplit mla_decode_split_for(std::int64_t batch, std::int64_t heads, std::int64_t max_len, bool wgmma,
                                           std::int64_t slots) {
  return mla_decode_split(max_len, batch * mla_decode_head_groups(heads, wgmma), slots, batch * heads);
}

// fp32 partial outputs plus running max and sum per (sequence, head, split).
inline std::int64_t mla_decode_workspace_bytes_for(std::int64_t batch, std::int64_t heads, std::int64_t kv_lora,
                                                   std::int64_t splits) {
  return batch * heads * splits * (kv_lora + 2) * 4;
}

}  // namespace tpb::kernels
