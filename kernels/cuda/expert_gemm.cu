// Routed-expert GEMMs (tpb/kernels/gpu/expert_gemm.h).
//
// Grouped kernel, weight-stationary: block (tile, slot) owns kWarps * kRows output rows of
// the slot-th expert that has rows (found by a block-wide scan of the offsets, ~2 steps for
// 384); each warp owns kRows of them. A warp streams its weight rows once per chunk of up
// to kTok sorted rows and applies every 16-byte weight load to all rows of the chunk,
// so at decode (a handful of rows per expert) the weights are read from HBM once and the
// kernel is bound by their bytes, which is the roofline for this op. Empty experts cost
// nothing. The grid depends only on (experts, pairs, out), so a captured graph serves every
// routing of the same number of pairs.
//
// Numerics: fp32 products and sums. Lane l sums k = 8l + 256i in increasing i (8 products
// per step in a fixed order), then the 32 lane sums meet in a fixed xor butterfly. Each
// output is produced by exactly one warp: no atomics, the same bits every run.
#include "tpb/kernels/gpu/expert_gemm.h"
#include "tpb/kernels/gpu/expert_gemm_tuning.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "cuda/nonempty_expert.cuh"
#include "cuda/bf16_vectors.cuh"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

namespace {

constexpr int kWarps = 8;
constexpr int kVec = 8;  // bf16 per 16-byte load

// 8 bf16 (one 16-byte load) widened to fp32, once per load rather than once per product.
__device__ __forceinline__ void widen8(const uint4& v, float (&f)[kVec]) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(p[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// The 8-term partial dot product of one step, summed in index order.
__device__ __forceinline__ float dot8(const float (&a)[kVec], const float (&b)[kVec]) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) s = fmaf(a[i], b[i], s);
  return s;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// kRows weight rows per warp (each x load serves kRows rows), kUnroll 16-byte weight loads
// per row in flight per lane (all issued before any is used), kTok sorted rows per pass
// (each weight load serves kTok rows; an expert with more takes several passes, the later
// ones reading its weights from L2), kMinBlocks resident blocks per SM asked of the compiler
// (it caps the registers). The sum order depends on none of them (lane l, k = 8l + 256i in
// increasing i, then the butterfly), so every variant gives the same bits; they differ only
// in how many bytes are in flight.
template <int kRows, int kUnroll, int kTok, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    expert_gemm_grouped_kernel(const __nv_bfloat16* __restrict__ x, const std::int32_t* __restrict__ offsets,
                               int experts, const __nv_bfloat16* __restrict__ w, std::int64_t expert_stride, std::int64_t in,
                               std::int64_t out, __nv_bfloat16* __restrict__ y) {
  detail::chain_after_prior_grids();
  static_assert(kRows * kTok <= 32, "one output per lane in the store");
  constexpr int kTile = kWarps * kRows;
  const int e = detail::nth_nonempty_expert<kWarps>(offsets, experts, static_cast<int>(blockIdx.y));
  if (e < 0) return;
  const std::int64_t begin = offsets[e], end = offsets[e + 1];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const __nv_bfloat16* we = w + static_cast<std::int64_t>(e) * expert_stride;
  const std::int64_t tiles = (out + kTile - 1) / kTile;
  const int in_vecs = static_cast<int>(in / kVec);  // 16-byte vectors per row

  // Tiles stride over blockIdx.x so that one scan above serves several tiles. No block-level
  // synchronisation below: a warp past `out` just moves on.
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t o0 = tile * kTile + warp * kRows;
    if (o0 >= out) continue;  // warp-uniform
    const uint4* wrow = reinterpret_cast<const uint4*>(we + o0 * in);  // row j starts j * in_vecs further
    const int rows = static_cast<int>(out - o0 < kRows ? out - o0 : kRows);
    for (std::int64_t p0 = begin; p0 < end; p0 += kTok) {
      const int n = static_cast<int>(end - p0 < kTok ? end - p0 : kTok);
      const uint4* xrow = reinterpret_cast<const uint4*>(x + p0 * in);  // token t starts t * in_vecs further
      float acc[kRows][kTok];
#pragma unroll
      for (int j = 0; j < kRows; ++j)
#pragma unroll
        for (int t = 0; t < kTok; ++t) acc[j][t] = 0.f;

      for (int v0 = lane; v0 < in_vecs; v0 += 32 * kUnroll) {
        // Every weight load of the step is issued before the first sum (load_early).
        uint4 wv[kUnroll][kRows];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
          for (int j = 0; j < kRows; ++j) {
            const int v = v0 + u * 32;
            wv[u][j] = (v < in_vecs && j < rows) ? detail::load_early(wrow + j * in_vecs + v) : make_uint4(0, 0, 0, 0);
          }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int v = v0 + u * 32;
          if (v < in_vecs) {  // false only in the row's last steps; they would add nothing
#pragma unroll
            for (int t = 0; t < kTok; ++t) {
              if (t < n) {  // warp-uniform
                float xf[kVec];
                widen8(__ldg(xrow + t * in_vecs + v), xf);
#pragma unroll
                for (int j = 0; j < kRows; ++j) {
                  float wf[kVec];
                  widen8(wv[u][j], wf);
                  acc[j][t] += dot8(wf, xf);
                }
              }
            }
          }
        }
      }

      // Every lane ends with every sum; lane j * kTok + t stores output (j, t).
      float mine = 0.f;
#pragma unroll
      for (int j = 0; j < kRows; ++j)
#pragma unroll
        for (int t = 0; t < kTok; ++t)
          if (t < n) {
            const float s = warp_sum(acc[j][t]);
            if (lane == j * kTok + t) mine = s;
          }
      const int j = lane / kTok, t = lane % kTok;
      if (j < rows && t < n) y[(p0 + t) * out + o0 + j] = __float2bfloat16(mine);
    }
  }
}

// Rows that are not whole 16-byte vectors (an HF config whose hidden size or per-rank expert
// width is not a multiple of 8 elements): one warp per output row of one expert, scalar
// loads, lane l summing k = l + 32i in increasing i, then the butterfly. Correctness over
// speed (such models are small); deterministic and graph-safe like the vector kernel (the
// grid depends on (experts, out) only, an expert without rows returns at once).
__global__ void __launch_bounds__(kWarps * 32)
    expert_gemm_grouped_narrow_kernel(const __nv_bfloat16* __restrict__ x, const std::int32_t* __restrict__ offsets,
                                      const __nv_bfloat16* __restrict__ w, std::int64_t expert_stride, std::int64_t in,
                                      std::int64_t out, __nv_bfloat16* __restrict__ y) {
  detail::chain_after_prior_grids();
  const int e = static_cast<int>(blockIdx.y);
  const std::int64_t begin = offsets[e], end = offsets[e + 1];
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (begin == end || o >= out) return;  // warp-uniform
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const __nv_bfloat16* wrow = w + e * expert_stride + o * in;
  for (std::int64_t p = begin; p < end; ++p) {
    const __nv_bfloat16* xrow = x + p * in;
    float acc = 0.f;
    for (std::int64_t k = lane; k < in; k += 32) acc = fmaf(__bfloat162float(wrow[k]), __bfloat162float(xrow[k]), acc);
    acc = warp_sum(acc);
    if (lane == 0) y[p * out + o] = __float2bfloat16(acc);
  }
}

bool vector_rows(const __nv_bfloat16* x_sorted, const __nv_bfloat16* weights, std::int64_t expert_stride,
                 std::int64_t in) {
  return in % kVec == 0 && expert_stride % kVec == 0 && detail::aligned16(x_sorted) && detail::aligned16(weights);
}

void launch_grouped_narrow(const __nv_bfloat16* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                           std::int64_t pairs, const __nv_bfloat16* weights, std::int64_t expert_stride,
                           std::int64_t in, std::int64_t out, __nv_bfloat16* y_sorted, cudaStream_t stream) {
  TPB_CHECK(experts >= 0 && experts <= 65535 && pairs >= 0 && in > 0 && out > 0,
            "expert_gemm_grouped: bad shape experts " << experts << " pairs " << pairs << " in " << in << " out "
                                                      << out);
  TPB_CHECK((out + kWarps - 1) / kWarps <= INT32_MAX, "expert_gemm_grouped: out " << out << " too large");
  if (experts == 0 || pairs == 0) return;
  const dim3 grid(static_cast<unsigned>((out + kWarps - 1) / kWarps), static_cast<unsigned>(experts));
  detail::launch_chained(expert_gemm_grouped_narrow_kernel, grid, kWarps * 32, 0, stream, x_sorted, offsets, weights,
                         expert_stride, in, out, y_sorted);
  TPB_CUDA_CHECK_LAUNCH();
}

// The variants tpb_bench compares (expert_gemm_tuning.h); expert_gemm_grouped launches
// variant 1 for short rows and for long ones when few pairs are routed, else variant 0.
struct Variant {
  const char* name;
  int rows;
  int min_blocks;
  void (*kernel)(const __nv_bfloat16*, const std::int32_t*, int, const __nv_bfloat16*, std::int64_t, std::int64_t,
                 std::int64_t, __nv_bfloat16*);
};

const Variant kVariants[] = {
    {"rows4_unroll2_tok8_blocks2", 4, 2, expert_gemm_grouped_kernel<4, 2, 8, 2>},
    {"rows4_unroll4_tok2_blocks2", 4, 2, expert_gemm_grouped_kernel<4, 4, 2, 2>},
    {"rows2_unroll8_tok4_blocks2", 2, 2, expert_gemm_grouped_kernel<2, 8, 4, 2>},
    {"rows1_unroll16_tok4_blocks2", 1, 2, expert_gemm_grouped_kernel<1, 16, 4, 2>},
    {"rows2_unroll4_tok2_blocks3", 2, 3, expert_gemm_grouped_kernel<2, 4, 2, 3>},
    {"rows1_unroll8_tok4_blocks3", 1, 3, expert_gemm_grouped_kernel<1, 8, 4, 3>},
};
constexpr int kVariantCount = static_cast<int>(sizeof(kVariants) / sizeof(kVariants[0]));

void launch_grouped(const Variant& v, const __nv_bfloat16* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                    std::int64_t pairs, const __nv_bfloat16* weights, std::int64_t expert_stride, std::int64_t in,
                    std::int64_t out, __nv_bfloat16* y_sorted, cudaStream_t stream) {
  TPB_CHECK(experts >= 0 && experts <= 65535 && pairs >= 0 && in > 0 && out > 0,
            "expert_gemm_grouped: bad shape experts " << experts << " pairs " << pairs << " in " << in << " out "
                                                      << out);
  TPB_CHECK(in % kVec == 0 && expert_stride % kVec == 0,
            "expert_gemm_grouped: in (" << in << ") and expert_stride (" << expert_stride
                                        << ") must be multiples of 8 elements (16-byte loads)");
  TPB_CHECK(reinterpret_cast<std::uintptr_t>(x_sorted) % 16 == 0 && reinterpret_cast<std::uintptr_t>(weights) % 16 == 0,
            "expert_gemm_grouped: x_sorted and weights must be 16-byte aligned");
  const std::int64_t tile_out = kWarps * v.rows;
  TPB_CHECK((out + tile_out - 1) / tile_out <= INT32_MAX, "expert_gemm_grouped: out " << out << " too large");
  if (experts == 0 || pairs == 0) return;
  // At most min(experts, pairs) experts have rows: one grid row per such slot, so decode
  // (8 of 384 experts at batch 1) launches no blocks for empty experts. Along x: at least
  // two waves of resident blocks in all, and at most kMaxTilesPerBlock tiles per block; a
  // block loops over its tiles, so its offsets scan is paid once per several tiles when few
  // experts are active, and many short blocks keep the SMs balanced when many are.
  constexpr std::int64_t kMaxTilesPerBlock = 4;
  const std::int64_t slots = experts < pairs ? experts : pairs;
  const std::int64_t tiles = (out + tile_out - 1) / tile_out;
  int device = 0, sms = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&device));
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t for_occupancy = (2 * v.min_blocks * static_cast<std::int64_t>(sms) + slots - 1) / slots;
  const std::int64_t for_balance = (tiles + kMaxTilesPerBlock - 1) / kMaxTilesPerBlock;
  const std::int64_t per_slot = for_occupancy > for_balance ? for_occupancy : for_balance;
  const dim3 grid(static_cast<unsigned>(tiles < per_slot ? tiles : per_slot), static_cast<unsigned>(slots));
  detail::launch_chained(v.kernel, grid, kWarps * 32, 0, stream, x_sorted, offsets, static_cast<int>(experts), weights,
                         expert_stride, in, out, y_sorted);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void expert_gemm_grouped(const __nv_bfloat16* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                         std::int64_t pairs, const __nv_bfloat16* weights, std::int64_t expert_stride,
                         std::int64_t in, std::int64_t out, __nv_bfloat16* y_sorted, cudaStream_t stream) {
  // Measured side by side on an H200 (tpb_bench expert_variant/*, Kimi TP2 shapes, share of
  // the copy bandwidth at 1 / 8 / 64 tokens): gate_up (in 7168) rows4_unroll2_tok8 0.81 /
  // 0.87 / 0.88 vs rows4_unroll4_tok2 0.80 / 0.98 / 0.81; down (in 1024) 0.65 / 0.81 / 0.73 vs
  // 0.76 / 0.96 / 0.84. A short row is only a few loads per lane: the deeper unroll has all
  // of it in flight at once; so does a long row when experts have one or two rows each, while
  // the 8-token chunks pay off once they have more. The threshold, pairs <= experts / 3: gate_up
  // at 16 tokens (128 pairs of 384 experts) 1.02 vs 0.98, at 32 tokens (256) 0.95 vs 1.01.
  // The same bits either way.
  if (!vector_rows(x_sorted, weights, expert_stride, in)) {
    launch_grouped_narrow(x_sorted, offsets, experts, pairs, weights, expert_stride, in, out, y_sorted, stream);
    return;
  }
  const bool few_rows_per_expert = pairs * 3 <= experts;
  const int variant = in <= 2048 || few_rows_per_expert ? 1 : 0;
  launch_grouped(kVariants[variant], x_sorted, offsets, experts, pairs, weights, expert_stride, in, out, y_sorted,
                 stream);
}

namespace tuning {

int expert_gemm_grouped_variants() { return kVariantCount; }

const char* expert_gemm_grouped_variant_name(int variant) {
  TPB_CHECK(variant >= 0 && variant < kVariantCount, "expert_gemm_grouped variant " << variant);
  return kVariants[variant].name;
}

void expert_gemm_grouped_variant(int variant, const __nv_bfloat16* x_sorted, const std::int32_t* offsets,
                                 std::int64_t experts, std::int64_t pairs, const __nv_bfloat16* weights,
                                 std::int64_t expert_stride, std::int64_t in, std::int64_t out,
                                 __nv_bfloat16* y_sorted, cudaStream_t stream) {
  TPB_CHECK(variant >= 0 && variant < kVariantCount, "expert_gemm_grouped variant " << variant);
  launch_grouped(kVariants[variant], x_sorted, offsets, experts, pairs, weights, expert_stride, in, out, y_sorted,
                 stream);
}

}  // namespace tuning

void expert_gemm_per_expert(Linear& linear, const __nv_bfloat16* x_sorted, const std::int32_t* offsets,
                            std::int64_t experts, const __nv_bfloat16* weights, std::int64_t expert_stride,
                            std::int64_t in, std::int64_t out, __nv_bfloat16* y_sorted, cudaStream_t stream) {
  TPB_CHECK(experts >= 0, "expert_gemm_per_expert: experts " << experts);
  if (experts == 0) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TPB_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  TPB_CHECK(capture == cudaStreamCaptureStatusNone,
            "expert_gemm_per_expert reads the offsets on the host and cannot be captured in a CUDA graph; "
            "use expert_gemm_grouped");
  std::vector<std::int32_t> h(static_cast<std::size_t>(experts) + 1);
  TPB_CUDA_CHECK(cudaMemcpyAsync(h.data(), offsets, h.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
  TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
  TPB_CHECK(h[0] == 0, "expert_gemm_per_expert: offsets[0] = " << h[0]);
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t begin = h[static_cast<std::size_t>(e)], end = h[static_cast<std::size_t>(e) + 1];
    TPB_CHECK(end >= begin, "expert_gemm_per_expert: offsets decrease at expert " << e);
    if (end == begin) continue;
    linear.bf16_out(x_sorted + begin * in, in, weights + e * expert_stride, y_sorted + begin * out, out, end - begin,
                    in, out, stream);
  }
}

}  // namespace tpb::gpu
