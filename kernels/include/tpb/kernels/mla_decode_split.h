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

// CTAs per (split, sequence) of the mma.sync kernel with up to max_row_tiles 16-head row tiles
// per CTA: the heads' row tiles in balanced groups (48 heads at two tiles per CTA run as 32 + 16).
constexpr std::int64_t mla_decode_mma_head_groups(std::int64_t heads, std::int64_t max_row_tiles) {
  const std::int64_t row_tiles = (heads + 15) / 16;
  return (row_tiles + max_row_tiles - 1) / max_row_tiles;
}

// CTAs per (split, sequence). mma.sync (its default configuration): heads in groups of at most
// 32; wgmma: groups of 64.
inline std::int64_t mla_decode_head_groups(std::int64_t heads, bool wgmma) {
  if (wgmma) return (heads + kMlaDecodeWgmmaHeadsPerCta - 1) / kMlaDecodeWgmmaHeadsPerCta;
  return mla_decode_mma_head_groups(heads, kMlaDecodeHeadsPerCta / 16);
}

// The mma.sync kernel's shared-memory configurations, in the order the launcher tries them: the
// first whose block fits the device's budget (tpb/kernels/kernel_paths.h, smem_budget_bytes)
// runs. The first is the kernel as tuned on an H200, and runs wherever it fits (every 9.0 and
// 10.x device, 227 KiB per block); the others are smaller for the devices that allow less
// (8.0: 163 KiB; 8.6, 8.9, 12.x: 99 KiB). A configuration is
//   row_tiles  16-head MMA row tiles per CTA at most (heads per CTA / 16);
//   stages     cp.async stages of cache rows (1: no copy in flight during the MMAs);
//   slices     warps per row tile, each taking 16 keys of a stage: a stage holds 16 * slices
//              cache rows, and each warp a 1/slices share of the latent columns of P C_lat.
// Every configuration sums in fp32 with P as bf16 hi + lo in a fixed order, deterministic; the
// order depends on the configuration (the stage's keys, the slices), so their bits differ.
struct MlaDecodeMmaConfig {
  const char* name;
  int row_tiles;
  int stages;
  int slices;
};
inline constexpr MlaDecodeMmaConfig kMlaDecodeMmaConfigs[] = {
    {"h32_s2_k64", 2, 2, 4},  // 32 heads, two stages of 64 keys: 191 KiB at Kimi-K2.5's row
    {"h32_s2_k32", 2, 2, 2},  // 32 heads, two stages of 32 keys: 113.75 KiB (8.0's 163 KiB)
    {"h16_s2_k32", 1, 2, 2},  // 16 heads, two stages of 32 keys: 93.4 KiB (99 KiB devices)
    {"h16_s1_k32", 1, 1, 2},  // 16 heads, one stage of 32 keys: 56.9 KiB; rows past 608 at 99 KiB
};
inline constexpr int kMlaDecodeMmaConfigCount = static_cast<int>(sizeof(kMlaDecodeMmaConfigs) / sizeof(kMlaDecodeMmaConfigs[0]));
static_assert(kMlaDecodeMmaConfigs[0].row_tiles * 16 == kMlaDecodeHeadsPerCta &&
                  kMlaDecodeMmaConfigs[0].slices * 16 == kMlaDecodeTileKeys,
              "the first configuration is the one mla_decode_head_groups and the plan's tile describe");

constexpr std::int64_t mla_decode_round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

// Shared memory of one block of configuration c at these widths for `heads` heads, bytes: the
// queries (row tiles * 16 rows) and the stages of cache rows, each row padded (to 16 columns for
// the score MMA, to 16 * slices latent columns for P C_lat, plus 8 so that rows start 16 bytes
// apart modulo 128), and the kernel's static arrays (row maxima and P fragments per row tile
// and slice, sized for the configuration's row tiles). mla_decode.cu static_asserts the static
// part against its arrays.
constexpr std::int64_t mla_decode_mma_static_smem_bytes(const MlaDecodeMmaConfig& c) {
  return std::int64_t{c.row_tiles} * c.slices * (16 * 4 + 2 * 32 * 16);
}
constexpr std::int64_t mla_decode_mma_row_stride(const MlaDecodeMmaConfig& c, std::int64_t kv_lora, std::int64_t rope) {
  return std::max(mla_decode_round_up(kv_lora + rope, 16), mla_decode_round_up(kv_lora, 16 * c.slices)) + 8;
}
// Row tiles one CTA holds for `heads` heads: the balanced groups' share.
constexpr std::int64_t mla_decode_mma_cta_row_tiles(const MlaDecodeMmaConfig& c, std::int64_t heads) {
  const std::int64_t tiles = (heads + 15) / 16, groups = mla_decode_mma_head_groups(heads, c.row_tiles);
  return (tiles + groups - 1) / groups;
}
constexpr std::int64_t mla_decode_mma_dynamic_smem_bytes(const MlaDecodeMmaConfig& c, std::int64_t heads,
                                                      std::int64_t kv_lora, std::int64_t rope) {
  return (mla_decode_mma_cta_row_tiles(c, heads) * 16 + std::int64_t{c.stages} * 16 * c.slices) *
         mla_decode_mma_row_stride(c, kv_lora, rope) * 2;
}
constexpr std::int64_t mla_decode_mma_smem_bytes(const MlaDecodeMmaConfig& c, std::int64_t heads, std::int64_t kv_lora,
                                              std::int64_t rope) {
  return mla_decode_mma_dynamic_smem_bytes(c, heads, kv_lora, rope) + mla_decode_mma_static_smem_bytes(c);
}
// The first configuration whose block fits budget_bytes (static and dynamic shared memory);
// -1 when none does.
constexpr int mla_decode_mma_config_for(std::int64_t heads, std::int64_t kv_lora, std::int64_t rope,
                                     std::int64_t budget_bytes) {
  for (int i = 0; i < kMlaDecodeMmaConfigCount; ++i)
    if (mla_decode_mma_smem_bytes(kMlaDecodeMmaConfigs[i], heads, kv_lora, rope) <= budget_bytes) return i;
  return -1;
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
// max_splits (at least 1) caps the count further: no plan has more splits than it.
inline MlaDecodeSplit mla_decode_split(std::int64_t max_len, std::int64_t work, std::int64_t slots,
                                       std::int64_t partial_rows, std::int64_t max_splits = kMlaDecodeMaxSplits) {
  constexpr std::int64_t kPartialRowsPerTile = 32 * 64;  // a tile's time, in partial rows
  MlaDecodeSplit p;
  const std::int64_t max_tiles = mla_decode_tiles(max_len);
  const std::int64_t cap = std::min<std::int64_t>({kMlaDecodeMaxSplits, max_splits, max_tiles,
                                                   std::max<std::int64_t>(1, (2 * slots + work - 1) / work)});
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

// The plan of a smaller configuration (kMlaDecodeMmaConfigs[1..]) of the mma.sync kernel, for
// the devices whose blocks cannot hold the first: work = batch x its head groups, planned at one
// resident CTA per SM (what such a block leaves room for where its configuration is needed: more
// than half of a 99 KiB device's 100 KiB SM, or of 8.0's 164 KiB; an H100 under
// TPB_KERNELS=portable fits two, but plans as the smaller device does), and never more splits
// than mla_decode_split_for gives the memory planner for the same shape on `sms` SMs
// (reference_engine/memory/engine_buffers.cpp): its workspace stays an upper bound. (The plan
// is not monotone in the work, so the cap is needed: at 65 keys on 2 SMs, work 2 takes one
// split and work 3 two.) Each split holds whole 64-key tiles, as every plan's.
inline MlaDecodeSplit mla_decode_split_small_config(std::int64_t batch, std::int64_t heads, std::int64_t kv_lora,
                                                    std::int64_t rope, std::int64_t max_len,
                                                    const MlaDecodeMmaConfig& c, std::int64_t sms) {
  const std::int64_t bound =
      mla_decode_split_for(batch, heads, max_len, mla_decode_wgmma_shape(kv_lora, rope), sms).splits;
  return mla_decode_split(max_len, batch * mla_decode_mma_head_groups(heads, c.row_tiles), sms, batch * heads, bound);
}

// fp32 partial outputs plus running max and sum per (sequence, head, split).
inline std::int64_t mla_decode_workspace_bytes_for(std::int64_t batch, std::int64_t heads, std::int64_t kv_lora,
                                                   std::int64_t splits) {
  return batch * heads * splits * (kv_lora + 2) * 4;
}

}  // namespace tpb::kernels
