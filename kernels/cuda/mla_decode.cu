// Absorbed-MLA decode attention over the latent KV cache (tpb/kernels/gpu/mla_decode.h).
//
// Pass 1, one CTA per (group of up to kGroup heads, split, sequence): every head of a
// sequence attends over the same cache rows, so the CTA loads each 16-row tile of the cache
// once into shared memory and uses it for all the heads of its group (MQA-style reuse; at
// 16 heads per group the cache is read once per 16 heads). It keeps a running max and sum
// per head and writes the unnormalised fp32 partial output of its key range.
// Pass 2, one CTA per (sequence, head): merges the splits in split order.
// The key ranges are fixed by max_len and the split count (never by seq_lens), so a captured
// graph serves any seq_lens; no atomics, so every call gives the same bits.
#include "tpb/kernels/gpu/mla_decode.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"

namespace tpb::gpu {

namespace {

constexpr int kThreads = 256;       // 8 warps
constexpr int kGroup = 16;          // heads per CTA (scores of 2 tokens x 16 heads = 32 per lane)
constexpr int kTile = 16;           // cache rows per tile: 2 per warp
constexpr int kMaxKvLora = 512;     // one column pair per thread in the output phase
constexpr int kMaxRope = 128;
constexpr int kMaxRow = kMaxKvLora + kMaxRope;
constexpr int kMaxLoads = (kTile * kMaxRow / 8 + kThreads - 1) / kThreads;  // 16-byte loads per thread per tile
constexpr int kMaxSplits = 256;
constexpr int kMergeThreads = 256;
constexpr int kCtasPerSm = 2;     // the split kernel's __launch_bounds__ minimum

struct Plan {
  int splits = 1;
  std::int64_t chunk = kTile;  // keys per split, a multiple of kTile
  int groups = 1;              // head groups
};

int sm_count() {
  int dev = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&dev));
  int sms = 0;
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

void validate(const MlaDecodeShape& s) {
  TPB_CHECK(s.batch >= 1 && s.batch <= 65535, "mla_decode: batch " << s.batch << " outside 1..65535");
  TPB_CHECK(s.heads >= 1, "mla_decode: heads " << s.heads);
  TPB_CHECK(s.kv_lora >= 8 && s.kv_lora <= kMaxKvLora && s.kv_lora % 8 == 0,
            "mla_decode: kv_lora " << s.kv_lora << " must be a multiple of 8 in 8.." << kMaxKvLora);
  TPB_CHECK(s.rope >= 0 && s.rope <= kMaxRope && s.rope % 8 == 0,
            "mla_decode: rope " << s.rope << " must be a multiple of 8 in 0.." << kMaxRope);
  TPB_CHECK(s.max_len >= 1, "mla_decode: max_len " << s.max_len);
}

// Splits of whole tiles, chosen for the shortest critical path: waves of resident CTAs times
// tiles per CTA, over split counts up to twice what fills the device once (more only adds
// merge traffic); ties go to fewer splits. A function of (max_len, batch * head groups, SM
// count) only, so workspace size and launch agree and a graph captured at any seq_lens
// stays valid.
Plan make_plan(const MlaDecodeShape& s, int sms) {
  Plan p;
  p.groups = static_cast<int>((s.heads + kGroup - 1) / kGroup);
  const std::int64_t work = s.batch * p.groups;
  const std::int64_t slots = static_cast<std::int64_t>(kCtasPerSm) * std::max(sms, 1);
  const std::int64_t max_tiles = (s.max_len + kTile - 1) / kTile;
  const std::int64_t cap = std::min<std::int64_t>({kMaxSplits, max_tiles, std::max<std::int64_t>(1, (2 * slots + work - 1) / work)});
  std::int64_t best_cost = -1;
  for (std::int64_t want = 1; want <= cap; ++want) {
    const std::int64_t tiles_per_split = (max_tiles + want - 1) / want;
    const std::int64_t splits = (max_tiles + tiles_per_split - 1) / tiles_per_split;
    const std::int64_t cost = (work * splits + slots - 1) / slots * tiles_per_split;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      p.chunk = tiles_per_split * kTile;
      p.splits = static_cast<int>(splits);
    }
  }
  return p;
}

// Workspace layout: o [batch*heads][splits][kv_lora], then m and l [batch*heads][splits], fp32.
struct Workspace {
  float* o;
  float* m;
  float* l;
};

Workspace carve(void* base, const MlaDecodeShape& s, const Plan& p) {
  const std::size_t rows = static_cast<std::size_t>(s.batch * s.heads) * static_cast<std::size_t>(p.splits);
  Workspace w;
  w.o = static_cast<float*>(base);
  w.m = w.o + rows * static_cast<std::size_t>(s.kv_lora);
  w.l = w.m + rows;
  return w;
}

std::size_t workspace_bytes(const MlaDecodeShape& s, const Plan& p) {
  const std::size_t rows = static_cast<std::size_t>(s.batch * s.heads) * static_cast<std::size_t>(p.splits);
  return rows * (static_cast<std::size_t>(s.kv_lora) + 2) * sizeof(float);
}

__device__ __forceinline__ float2 bf2_to_f2(std::uint32_t bits) {
  // bf16 is the top half of an fp32: widening is exact.
  return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
}

__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    mla_decode_split_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ cache,
                            const std::int32_t* __restrict__ seq_lens, int heads, int kv_lora, int rope,
                            std::int64_t max_len, int splits, std::int64_t chunk, float scale,
                            float* __restrict__ o_part, float* __restrict__ m_part, float* __restrict__ l_part) {
  const int g0 = blockIdx.x * kGroup;
  const int split = blockIdx.y;
  const int b = blockIdx.z;
  const int gn = min(kGroup, heads - g0);
  const int row = kv_lora + rope;  // bf16 values per cache row and per query
  const int row2 = row / 2;        // bf16 pairs
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;

  const std::int64_t seq_len = min(max(static_cast<std::int64_t>(seq_lens[b]), std::int64_t{0}), max_len);
  const std::int64_t start = static_cast<std::int64_t>(split) * chunk;
  const std::int64_t end = min(start + chunk, seq_len);
  const std::size_t part_row0 = (static_cast<std::size_t>(b) * heads + g0) * splits + split;  // + g * splits
  if (start >= end) {
    // Nothing to attend: the merge skips this split on l == 0 (its o is never read).
    if (tid < gn) {
      m_part[part_row0 + static_cast<std::size_t>(tid) * splits] = -INFINITY;
      l_part[part_row0 + static_cast<std::size_t>(tid) * splits] = 0.0f;
    }
    return;
  }

  extern __shared__ __align__(16) unsigned char smem[];
  float* q_s = reinterpret_cast<float*>(smem);                                         // [kGroup][row] fp32
  std::uint32_t* c_s = reinterpret_cast<std::uint32_t*>(q_s + kGroup * row);           // [kTile][row2] bf16 pairs
  float* p_s = reinterpret_cast<float*>(c_s + kTile * row2);                           // [kTile][kGroup] scores, then p
  float* mnew_s = p_s + kTile * kGroup;                                                // [kGroup]
  float* corr_s = mnew_s + kGroup;                                                     // [kGroup]

  // Queries widened once; heads past the group's end are zero (their results are dropped).
  for (int i = tid; i < kGroup * row2; i += kThreads) {
    const int g = i / row2, dp = i - g * row2;
    float2 v = make_float2(0.0f, 0.0f);
    if (g < gn) {
      const std::uint32_t* qrow =
          reinterpret_cast<const std::uint32_t*>(q + (static_cast<std::size_t>(b) * heads + g0 + g) * row);
      v = bf2_to_f2(qrow[dp]);
    }
    reinterpret_cast<float2*>(q_s)[i] = v;
  }

  // The tile in flight lives in registers while the previous one is computed on.
  const int tile_vecs = kTile * row / 8;  // 16-byte vectors per tile
  const int row_vecs = row / 8;
  const uint4* cache_b = reinterpret_cast<const uint4*>(cache + static_cast<std::size_t>(b) * max_len * row);
  uint4 pre[kMaxLoads];
  auto fetch = [&](std::int64_t t0) {
#pragma unroll
    for (int k = 0; k < kMaxLoads; ++k) {
      const int i = tid + k * kThreads;
      pre[k] = make_uint4(0, 0, 0, 0);  // rows past the end are zeros: p = 0 must not meet NaN garbage
      if (i < tile_vecs) {
        const int r = i / row_vecs;
        const std::int64_t j = t0 + r;
        if (j < end) pre[k] = __ldg(cache_b + static_cast<std::size_t>(j) * row_vecs + (i - r * row_vecs));
      }
    }
  };

  const int kl2 = kv_lora / 2;
  const int cp = tid;  // this thread's output column pair
  float2 acc[kGroup];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) acc[g] = make_float2(0.0f, 0.0f);
  float m_run = -INFINITY, l_run = 0.0f;  // meaningful in threads 0..kGroup-1 (head = tid)

  fetch(start);
  for (std::int64_t t0 = start; t0 < end; t0 += kTile) {
    __syncthreads();  // previous tile fully consumed (and q_s written, first time)
#pragma unroll
    for (int k = 0; k < kMaxLoads; ++k) {
      const int i = tid + k * kThreads;
      if (i < tile_vecs) reinterpret_cast<uint4*>(c_s)[i] = pre[k];
    }
    __syncthreads();
    if (t0 + kTile < end) fetch(t0 + kTile);

    // Scores: warp w takes rows 2w and 2w+1, lanes split the row; v[t * 16 + g].
    {
      float v[2 * kGroup];
#pragma unroll
      for (int i = 0; i < 2 * kGroup; ++i) v[i] = 0.0f;
      const std::uint32_t* c0 = c_s + (2 * warp) * row2;
      const std::uint32_t* c1 = c0 + row2;
      for (int dp = lane; dp < row2; dp += 32) {
        const float2 a = bf2_to_f2(c0[dp]);
        const float2 c = bf2_to_f2(c1[dp]);
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          const float2 qq = reinterpret_cast<const float2*>(q_s + g * row)[dp];
          v[g] = fmaf(qq.y, a.y, fmaf(qq.x, a.x, v[g]));
          v[kGroup + g] = fmaf(qq.y, c.y, fmaf(qq.x, c.x, v[kGroup + g]));
        }
      }
      // Transposing butterfly (31 shuffles for 32 sums instead of 160): in the step of width m
      // a lane keeps the half of v[0..2m) its bit m selects and adds the partner's copy of it,
      // so after the last step v[0] holds index L summed over the warp, in a fixed order.
#pragma unroll
      for (int m = 16; m >= 1; m >>= 1) {
        const bool upper = (lane & m) != 0;
#pragma unroll
        for (int i = 0; i < m; ++i) {
          const float send = upper ? v[i] : v[i + m];
          const float keep = upper ? v[i + m] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, m);
        }
      }
      const int t = 2 * warp + (lane >> 4);
      const int g = lane & (kGroup - 1);
      p_s[t * kGroup + g] = (t0 + t < end) ? v[0] * scale : -INFINITY;
    }
    __syncthreads();

    // Online softmax, one thread per head; the tile always holds a valid row, so m_new is finite.
    if (tid < kGroup) {
      float tmax = -INFINITY;
      for (int t = 0; t < kTile; ++t) tmax = fmaxf(tmax, p_s[t * kGroup + tid]);
      const float m_new = fmaxf(m_run, tmax);
      corr_s[tid] = expf(m_run - m_new);  // exp(-inf) = 0 on the first tile
      mnew_s[tid] = m_new;
      m_run = m_new;
    }
    __syncthreads();
    static_assert(kThreads == kTile * kGroup, "one thread per (row, head) of the tile");
    p_s[tid] = expf(p_s[tid] - mnew_s[tid % kGroup]);
    __syncthreads();

    if (tid < kGroup) {
      float sum = 0.0f;
      for (int t = 0; t < kTile; ++t) sum += p_s[t * kGroup + tid];
      l_run = l_run * corr_s[tid] + sum;
    }
    if (cp < kl2) {
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const float cr = corr_s[g];
        acc[g].x *= cr;
        acc[g].y *= cr;
      }
      for (int t = 0; t < kTile; ++t) {
        const float2 c = bf2_to_f2(c_s[t * row2 + cp]);
        const float4* pt = reinterpret_cast<const float4*>(p_s + t * kGroup);
#pragma unroll
        for (int g4 = 0; g4 < kGroup / 4; ++g4) {
          const float4 p = pt[g4];
          acc[4 * g4 + 0].x = fmaf(p.x, c.x, acc[4 * g4 + 0].x);
          acc[4 * g4 + 0].y = fmaf(p.x, c.y, acc[4 * g4 + 0].y);
          acc[4 * g4 + 1].x = fmaf(p.y, c.x, acc[4 * g4 + 1].x);
          acc[4 * g4 + 1].y = fmaf(p.y, c.y, acc[4 * g4 + 1].y);
          acc[4 * g4 + 2].x = fmaf(p.z, c.x, acc[4 * g4 + 2].x);
          acc[4 * g4 + 2].y = fmaf(p.z, c.y, acc[4 * g4 + 2].y);
          acc[4 * g4 + 3].x = fmaf(p.w, c.x, acc[4 * g4 + 3].x);
          acc[4 * g4 + 3].y = fmaf(p.w, c.y, acc[4 * g4 + 3].y);
        }
      }
    }
  }

  if (cp < kl2) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
      if (g < gn)
        reinterpret_cast<float2*>(o_part + (part_row0 + static_cast<std::size_t>(g) * splits) * kv_lora)[cp] = acc[g];
  }
  if (tid < gn) {
    m_part[part_row0 + static_cast<std::size_t>(tid) * splits] = m_run;
    l_part[part_row0 + static_cast<std::size_t>(tid) * splits] = l_run;
  }
}

// One CTA per (sequence, head): out = sum_s w_s o_s / sum_s w_s l_s, w_s = exp(m_s - max m),
// summed in split order by every thread alike.
__global__ void __launch_bounds__(kMergeThreads)
    mla_decode_merge_kernel(const float* __restrict__ o_part, const float* __restrict__ m_part,
                            const float* __restrict__ l_part, int kv_lora, int splits,
                            __nv_bfloat16* __restrict__ o_lat) {
  __shared__ float w_s[kMaxSplits];
  __shared__ float l_s[kMaxSplits];
  const std::size_t bh = blockIdx.x;
  const float* m = m_part + bh * splits;
  const float* l = l_part + bh * splits;
  float m_max = -INFINITY;
  for (int s = 0; s < splits; ++s)
    if (l[s] > 0.0f) m_max = fmaxf(m_max, m[s]);
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    const bool live = l[s] > 0.0f;
    w_s[s] = live ? expf(m[s] - m_max) : 0.0f;
    l_s[s] = live ? l[s] : 0.0f;
  }
  __syncthreads();
  float denom = 0.0f;
  for (int s = 0; s < splits; ++s) denom += w_s[s] * l_s[s];
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  const float* o = o_part + bh * splits * kv_lora;
  for (int cp = threadIdx.x; cp < kv_lora / 2; cp += blockDim.x) {
    float2 sum = make_float2(0.0f, 0.0f);
    for (int s = 0; s < splits; ++s) {
      if (w_s[s] == 0.0f) continue;  // empty split: its o was never written
      const float2 v = reinterpret_cast<const float2*>(o + static_cast<std::size_t>(s) * kv_lora)[cp];
      sum.x = fmaf(w_s[s], v.x, sum.x);
      sum.y = fmaf(w_s[s], v.y, sum.y);
    }
    reinterpret_cast<__nv_bfloat162*>(o_lat + bh * kv_lora)[cp] = __floats2bfloat162_rn(sum.x * inv, sum.y * inv);
  }
}

}  // namespace

std::size_t mla_decode_workspace_bytes(const MlaDecodeShape& shape) {
  validate(shape);
  return workspace_bytes(shape, make_plan(shape, sm_count()));
}

void mla_decode_attention(const __nv_bfloat16* q, const __nv_bfloat16* cache, const std::int32_t* seq_lens,
                          const MlaDecodeShape& shape, float scale, void* workspace, __nv_bfloat16* o_lat,
                          cudaStream_t stream) {
  validate(shape);
  TPB_CHECK(reinterpret_cast<std::uintptr_t>(q) % 16 == 0 && reinterpret_cast<std::uintptr_t>(cache) % 16 == 0 &&
                reinterpret_cast<std::uintptr_t>(o_lat) % 4 == 0 && reinterpret_cast<std::uintptr_t>(workspace) % 16 == 0,
            "mla_decode: q and cache must be 16-byte aligned, o_lat 4-byte, workspace 16-byte");
  const Plan p = make_plan(shape, sm_count());
  const Workspace w = carve(workspace, shape, p);
  const int row = static_cast<int>(shape.kv_lora + shape.rope);
  const std::size_t smem = static_cast<std::size_t>(kGroup) * row * sizeof(float) +
                           static_cast<std::size_t>(kTile) * row * 2 + kTile * kGroup * sizeof(float) +
                           2 * kGroup * sizeof(float);
  // Above the default 48 KiB at row 576; a host-side attribute, legal under stream capture.
  TPB_CUDA_CHECK(cudaFuncSetAttribute(mla_decode_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  // Head groups vary fastest: the groups of one split run side by side and the second read of
  // the same cache rows comes from L2.
  const dim3 grid(static_cast<unsigned>(p.groups), static_cast<unsigned>(p.splits), static_cast<unsigned>(shape.batch));
  mla_decode_split_kernel<<<grid, kThreads, smem, stream>>>(
      q, cache, seq_lens, static_cast<int>(shape.heads), static_cast<int>(shape.kv_lora), static_cast<int>(shape.rope),
      shape.max_len, p.splits, p.chunk, scale, w.o, w.m, w.l);
  TPB_CUDA_CHECK_LAUNCH();
  mla_decode_merge_kernel<<<static_cast<unsigned>(shape.batch * shape.heads), kMergeThreads, 0, stream>>>(
      w.o, w.m, w.l, static_cast<int>(shape.kv_lora), p.splits, o_lat);
  TPB_CUDA_CHECK_LAUNCH();
}

void mla_decode_attention_ref(const std::uint16_t* q_bf16, const std::uint16_t* cache_bf16,
                              const std::int32_t* seq_lens, const MlaDecodeShape& shape, float scale, float* o_lat) {
  validate(shape);
  const std::int64_t row = shape.kv_lora + shape.rope;
  std::vector<float> score;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const std::int64_t n = seq_lens[b];
    TPB_CHECK(n >= 1 && n <= shape.max_len, "mla_decode_attention_ref: seq_lens[" << b << "] = " << n);
    const std::uint16_t* cache_b = cache_bf16 + b * shape.max_len * row;
    score.assign(static_cast<std::size_t>(n), 0.0f);
    for (std::int64_t h = 0; h < shape.heads; ++h) {
      const std::uint16_t* qh = q_bf16 + (b * shape.heads + h) * row;
      float m = -INFINITY;
      for (std::int64_t j = 0; j < n; ++j) {
        float dot = 0.0f;
        for (std::int64_t d = 0; d < row; ++d) dot += bf16_to_float(qh[d]) * bf16_to_float(cache_b[j * row + d]);
        score[j] = dot * scale;
        m = std::max(m, score[j]);
      }
      float sum = 0.0f;
      for (std::int64_t j = 0; j < n; ++j) {
        score[j] = std::exp(score[j] - m);
        sum += score[j];
      }
      float* out = o_lat + (b * shape.heads + h) * shape.kv_lora;
      std::fill(out, out + shape.kv_lora, 0.0f);
      for (std::int64_t j = 0; j < n; ++j) {
        const float p = score[j] / sum;
        for (std::int64_t d = 0; d < shape.kv_lora; ++d) out[d] += p * bf16_to_float(cache_b[j * row + d]);
      }
    }
  }
}

}  // namespace tpb::gpu
