// The INT4 routed experts' tile kernel (expert_gemm_int4_prefill, tpb/kernels/gpu/expert_gemm_int4.h;
// the grouped decode kernel and the shared design notes are in expert_gemm_int4.cu). 128 rows
// of one expert x 128 outputs per block, 8 warps of 64 x 32; the tokens are the MMA's M
// (ldmatrix from shared memory) and the dequantized weights its B. Activations and packed
// words stream through a cp.async pipeline 64 inputs at a time; each thread dequantizes the 4
// words it copied itself (no barrier between its copy and its use) into a double-buffered bf16
// tile, so one barrier per step suffices. Row tiles are found on the device (tile n of expert
// e, counted over the experts in order); surplus blocks return at once. Every output is one
// fixed sequence of fp32 MMA accumulations in ascending 16-input steps: the same bits on every
// call, whatever the pipeline depth.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/expert_gemm_int4_common.cuh"
#include "cuda/mma_sync.cuh"
#include "cuda/programmatic_launch.cuh"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/device_limits.h"
#include "tpb/kernels/gpu/expert_gemm_int4.h"
#include "tpb/kernels/int4_format.h"
#include "tpb/kernels/kernel_paths.h"

namespace tpb::gpu {

namespace {

using namespace int4_kernels;  // NOLINT: the shared block shape and dequantization

// ---- prefill kernel ----

constexpr int kPM = 128;              // rows (tokens of one expert) per block
constexpr int kPN = 128;              // outputs per block
constexpr int kPK = 64;               // inputs per pipeline step: two scale groups
// cp.async stages: 3 where the device's shared memory per block holds them (105 KiB), else 2
// (82 KiB: an RTX PRO 6000's 99 KiB, and any GPU under TPB_KERNELS=portable). The depth changes
// only how far the copies run ahead: the same MMAs in the same order, the same bits.
constexpr int kPMaxStages = 3;
constexpr int kPRow = kPK + 8;        // bf16 per shared row: 144 bytes, ldmatrix without bank conflicts
constexpr int kPWords = kPK / int4::kPerWord;  // packed words per row and step
constexpr int kXStageBytes = kPM * kPRow * 2;
constexpr int kPackedStageBytes = kPN * kPWords * 4;
constexpr int kScaleStageBytes = kThreads * 4;  // one scale word per thread
constexpr int kWTileBytes = kPN * kPRow * 2;
constexpr int prefill_smem_bytes(int stages) {
  return stages * (kXStageBytes + kPackedStageBytes + kScaleStageBytes) + 2 * kWTileBytes;
}
static_assert(prefill_smem_bytes(2) <= 99 * 1024, "the 2-stage prefill kernel fits compute capability 12.x's 99 KiB");
static_assert(kPN * 2 == kThreads, "each thread copies and dequantizes one group of one weight row per step");

// The expert and row tile (from 0) of the n-th tile of kPM rows, the experts' tiles counted in
// expert order; false when there are fewer. Called by every thread of the block.
__device__ bool nth_row_tile(const std::int32_t* __restrict__ offsets, int experts, int n, int& expert, int& tile) {
  __shared__ int s_warp_total[kWarps];
  __shared__ int s_expert, s_tile;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  if (tid == 0) s_expert = -1;
  int before = 0;  // tiles of the experts in earlier chunks
  for (int base = 0; base < experts; base += kThreads) {
    const int e = base + tid;
    const int count = e < experts ? (offsets[e + 1] - offsets[e] + kPM - 1) / kPM : 0;
    int inclusive = count;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += v;
    }
    if (lane == 31) s_warp_total[warp] = inclusive;
    __syncthreads();
    int first = before + inclusive - count, total = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) first += s_warp_total[w];
      total += s_warp_total[w];
    }
    if (count > 0 && n >= first && n < first + count) {
      s_expert = e;
      s_tile = n - first;
    }
    before += total;
    __syncthreads();
    if (s_expert >= 0 || before > n) break;  // block-uniform
  }
  expert = s_expert;
  tile = s_tile;
  return expert >= 0;
}

// The 4 words of one group (32 inputs of one row) to 32 bf16 weights in input order.
__device__ __forceinline__ void dequant_group_natural(const uint4& words, std::uint16_t scale_bits,
                                                      __nv_bfloat16* dst) {
  const __nv_bfloat162 s2 = scale_pair(scale_bits);
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const std::uint32_t word = word_of(words, w), shifted = word >> 4;
    uint4 o;
    std::uint32_t* op = &o.x;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Byte k of the word (nibbles 2k, 2k + 1) with nibble 2k in bits 0-3, nibble 2k + 1 in 16-19.
      const std::uint32_t sel = static_cast<std::uint32_t>(k | (k << 4) | ((4 + k) << 8) | ((4 + k) << 12));
      op[k] = dequant_pair(__byte_perm(word, shifted, sel), s2);
    }
    *reinterpret_cast<uint4*>(dst + 8 * w) = o;
  }
}

template <int kPStages>
__global__ void __launch_bounds__(kThreads, 2)
    expert_gemm_int4_prefill_kernel(const __nv_bfloat16* __restrict__ x, const std::int32_t* __restrict__ offsets,
                                    int experts, const std::uint32_t* __restrict__ packed,
                                    const __nv_bfloat16* __restrict__ scales, int in, int out,
                                    __nv_bfloat16* __restrict__ y) {
  detail::chain_after_prior_grids();
  int e = 0, row_tile = 0;
  if (!nth_row_tile(offsets, experts, static_cast<int>(blockIdx.y), e, row_tile)) return;
  const std::int64_t p_first = offsets[e] + static_cast<std::int64_t>(row_tile) * kPM;
  const int rows = static_cast<int>(offsets[e + 1] - p_first < kPM ? offsets[e + 1] - p_first : kPM);
  const int n_first = static_cast<int>(blockIdx.x) * kPN;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int words_per_row = in / int4::kPerWord, groups = in / kGroup, steps = (in + kPK - 1) / kPK;
  const std::uint32_t* pe = packed + e * (static_cast<std::int64_t>(out) * words_per_row);
  const __nv_bfloat16* se = scales + e * (static_cast<std::int64_t>(out) * groups);

  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(smem);
  std::uint32_t* ps = reinterpret_cast<std::uint32_t*>(smem + kPStages * kXStageBytes);
  std::uint32_t* ss = reinterpret_cast<std::uint32_t*>(smem + kPStages * (kXStageBytes + kPackedStageBytes));
  __nv_bfloat16* wt = reinterpret_cast<__nv_bfloat16*>(
      smem + kPStages * (kXStageBytes + kPackedStageBytes + kScaleStageBytes));

  // This thread's weight row and group of each step (it copies and dequantizes them).
  const int my_n = tid / 2, my_half = tid % 2;
  const bool my_row_ok = n_first + my_n < out;
  const std::uint32_t* my_packed = pe + static_cast<std::int64_t>(n_first + my_n) * words_per_row;
  const __nv_bfloat16* my_scales = se + static_cast<std::int64_t>(n_first + my_n) * groups;

  auto issue = [&](int step) {
    if (step < steps) {
      const int stage = step % kPStages;
#pragma unroll
      for (int i = 0; i < kPM * kPK / 8 / kThreads; ++i) {
        const int idx = tid + i * kThreads, r = idx / (kPK / 8), c = idx % (kPK / 8);
        const int col = step * kPK + c * 8;
        const bool ok = r < rows && col < in;
        const __nv_bfloat16* src = ok ? x + (p_first + r) * in + col : x;
        detail::cp_async16(detail::smem_addr(xs + (stage * kPM + r) * kPRow + c * 8), src, ok);
      }
      const int group = step * 2 + my_half;
      const bool ok = my_row_ok && group < groups;
      const int gi = ok ? group : 0;
      int shift;
      detail::cp_async16(detail::smem_addr(ps + (stage * kPN + my_n) * kPWords + my_half * 4),
                         ok ? my_packed + gi * 4 : packed, ok);
      cp_async4(detail::smem_addr(ss + stage * kThreads + tid), scale_word(ok ? my_scales + gi : scales, shift), ok);
    }
    detail::cp_async_commit();  // an empty group past the end keeps the wait counts uniform
  };
  // Which half of a scale word is this thread's: the same for every step when a row has an even
  // number of groups; else it alternates with the group.
  auto scale_shift = [&](int step) {
    int shift;
    scale_word(my_scales + step * 2 + my_half, shift);
    return shift;
  };

#pragma unroll
  for (int s = 0; s < kPStages - 1; ++s) issue(s);

  // Warp (wm, wn) owns rows 64 wm .. +63 and outputs 32 wn .. +31 of the tile.
  const int wm = warp / 4, wn = warp % 4;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.f;

  for (int step = 0; step < steps; ++step) {
    const int stage = step % kPStages, buf = step % 2;
    detail::cp_async_wait<kPStages - 2>();  // this thread's copies of `step` have landed
    const uint4 words = *reinterpret_cast<const uint4*>(ps + (stage * kPN + my_n) * kPWords + my_half * 4);
    const auto scale = static_cast<std::uint16_t>(ss[stage * kThreads + tid] >> scale_shift(step));
    dequant_group_natural(words, scale, wt + (buf * kPN + my_n) * kPRow + my_half * kGroup);
    // Every thread's dequantized group and activation copies are visible, and every warp is
    // past the MMAs of step - 1: its stage may be refilled.
    __syncthreads();
    issue(step + kPStages - 1);

    const __nv_bfloat16* xt = xs + stage * kPM * kPRow;
    const __nv_bfloat16* wtile = wt + buf * kPN * kPRow;
#pragma unroll
    for (int kk = 0; kk < kPK / 16; ++kk) {
      std::uint32_t a[4][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        detail::ldmatrix_x4(detail::smem_addr(xt + (64 * wm + 16 * i + lane % 16) * kPRow + kk * 16 + (lane / 16) * 8),
                            a[i]);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        std::uint32_t r[4];
        detail::ldmatrix_x4(detail::smem_addr(wtile + (32 * wn + 16 * jj + (lane / 16) * 8 + lane % 8) * kPRow +
                                              kk * 16 + ((lane / 8) % 2) * 8),
                            r);
        b[2 * jj][0] = r[0];
        b[2 * jj][1] = r[1];
        b[2 * jj + 1][0] = r[2];
        b[2 * jj + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) detail::mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
    }
  }
  detail::cp_async_wait<0>();

  // d0, d1: row g, outputs 2t, 2t + 1; d2, d3: row g + 8.
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 64 * wm + 16 * i + g + 8 * h, o = n_first + 32 * wn + 8 * j + 2 * t;
        if (r >= rows) continue;
        __nv_bfloat16* dst = y + (p_first + r) * out + o;
        const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if (o + 1 < out && out % 2 == 0) {
          *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(v0, v1);
        } else {
          if (o < out) dst[0] = __float2bfloat16_rn(v0);
          if (o + 1 < out) dst[1] = __float2bfloat16_rn(v1);
        }
      }
}

}  // namespace

void expert_gemm_int4_prefill(const __nv_bfloat16* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                              std::int64_t pairs, const Int4ExpertWeights& w, __nv_bfloat16* y_sorted,
                              cudaStream_t stream) {
  check_common("expert_gemm_int4_prefill", x_sorted, experts, pairs, w);
  if (experts == 0 || pairs == 0) return;
  // Each expert's last tile may be partial: at most one extra tile per expert with rows.
  const std::int64_t slots = experts < pairs ? experts : pairs;
  const std::int64_t row_tiles = (pairs + kPM - 1) / kPM + slots;
  TPB_CHECK(row_tiles <= 65535, "expert_gemm_int4_prefill: " << pairs << " pairs over " << experts
                                                             << " experts need more than 65535 row tiles");
  const dim3 grid(static_cast<unsigned>((w.out + kPN - 1) / kPN), static_cast<unsigned>(row_tiles));
  // The deepest pipeline the budget holds (the device's maximum; 99 KiB under
  // TPB_KERNELS=portable, as on an RTX PRO 6000: tpb/kernels/kernel_paths.h).
  const int budget = kernels::smem_budget_bytes(device_smem_optin_bytes(), kernels::kernels_setting());
  TPB_CHECK(prefill_smem_bytes(2) <= budget, "expert_gemm_int4_prefill: " << prefill_smem_bytes(2)
                                                 << " bytes of shared memory per block needed, the device allows "
                                                 << budget);
  const bool deep = prefill_smem_bytes(kPMaxStages) <= budget;
  auto* kernel = deep ? expert_gemm_int4_prefill_kernel<kPMaxStages> : expert_gemm_int4_prefill_kernel<2>;
  const int smem = prefill_smem_bytes(deep ? kPMaxStages : 2);
  // Above the default 48 KiB; a host-side attribute, legal under stream capture.
  TPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  detail::launch_chained(kernel, grid, kThreads, static_cast<std::size_t>(smem), stream, x_sorted, offsets,
                         static_cast<int>(experts), w.packed, w.scales, static_cast<int>(w.in), static_cast<int>(w.out),
                         y_sorted);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
