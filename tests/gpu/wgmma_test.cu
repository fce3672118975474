// The wgmma building blocks (kernels/cuda/wgmma.cuh) against a CPU product, before any kernel
// is built on them: one warpgroup computes C[64 x 64] = A[64 x 64] * B over K = 64 (four k16
// steps) with both operands in 128-byte-swizzled shared memory, B stored K-major ([N][K], the
// scores' cache tile) and MN-major ([K][N], the P.V product's cache tile). Fresh random bf16
// inputs; the products are exact in fp32 and the sums of 64 differ from the CPU's only in their
// order, so the bound is a few fp32 ulps of sum |a b|.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/wgmma.cuh"
#include "gpu_test_support.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/kernel_paths.h"

namespace tpb::test {
namespace {

constexpr int kDim = 64;

// Why these tests cannot run here ("" when they can): where the engine's wgmma kernels would
// not, as the kernel-path registry says (a compute capability 9.0 device with sm_90a code in
// the build, TPB_KERNELS not portable).
std::string no_wgmma_here() {
  const kernels::KernelPath& path = kernels::kernel_path(kernels::KernelOp::mla_decode);
  return path.wgmma() ? "" : "no wgmma on this device: mla_decode runs " + path.text();
}

// C[64 x kN], row-major, from a warpgroup's m64nkN accumulator in wgmma.cuh's layout.
template <int kN>
__device__ void store_accumulator(const float (&d)[kN / 2], float* c) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = 16 * warp + lane / 4;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const int col = 8 * j + 2 * (lane % 4);
    c[row * kN + col] = d[4 * j];
    c[row * kN + col + 1] = d[4 * j + 1];
    c[(row + 8) * kN + col] = d[4 * j + 2];
    c[(row + 8) * kN + col + 1] = d[4 * j + 3];
  }
}

// c [64][n] from the GPU against sum_k a[m][k] b_at(k, n) over k < 64 in double: the products
// are exact in fp32 and the sums differ only in their order, so within a few fp32 ulps of
// sum |a b|.
template <class BAt>
void expect_product(const std::vector<std::uint16_t>& a, BAt b_at, const std::vector<float>& c, int n_cols,
                    const char* what) {
  for (int m = 0; m < kDim; ++m)
    for (int n = 0; n < n_cols; ++n) {
      double want = 0, mag = 0;
      for (int k = 0; k < kDim; ++k) {
        const double p = static_cast<double>(bf16_to_float(a[m * kDim + k])) * b_at(k, n);
        want += p;
        mag += std::fabs(p);
      }
      ASSERT_LE(std::fabs(c[m * n_cols + n] - want), 64 * 0x1p-24 * mag + 1e-30)
          << "C[" << m << "][" << n << "] = " << c[m * n_cols + n] << ", want " << want << what;
    }
}

// a: [64][64] row-major (M, K); b: [64][64] row-major, [N][K] when !kTransB, [K][N] when kTransB.
template <int kTransB>
__global__ void __launch_bounds__(128) wgmma_64x64x64(const std::uint16_t* a, const std::uint16_t* b, float* c) {
#if TPB_WGMMA_COMPILED
  __shared__ __align__(1024) unsigned char a_s[kDim * 128];
  __shared__ __align__(1024) unsigned char b_s[kDim * 128];
  for (int i = threadIdx.x; i < kDim * kDim; i += blockDim.x) {
    const int r = i / kDim, col = i % kDim;
    *reinterpret_cast<std::uint16_t*>(a_s + gpu::detail::sw128_offset(r, col)) = a[i];
    *reinterpret_cast<std::uint16_t*>(b_s + gpu::detail::sw128_offset(r, col)) = b[i];
  }
  gpu::detail::fence_proxy_async();
  __syncthreads();
  const std::uint32_t a_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(a_s));
  const std::uint32_t b_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(b_s));
  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.0f;
  gpu::detail::wgmma_fence();
#pragma unroll
  for (int k = 0; k < kDim / 16; ++k) {
    const std::uint64_t ad = gpu::detail::sw128_desc(a_addr + 32 * k, 16, 1024);
    const std::uint64_t bd = kTransB ? gpu::detail::sw128_desc(b_addr + 2048 * k, 8192, 1024)
                                     : gpu::detail::sw128_desc(b_addr + 32 * k, 16, 1024);
    gpu::detail::wgmma_m64n64k16_ss<kTransB>(d, ad, bd, 1);
  }
  gpu::detail::wgmma_commit();
  gpu::detail::wgmma_wait<0>();
  store_accumulator<kDim>(d, c);
#else
  __trap();  // not launched outside sm_90a (wgmma.cuh)
#endif
}

template <int kTransB>
void check_product(std::uint32_t seed) {
  const auto a = random_bf16(kDim * kDim, seed, -2.f, 2.f);
  const auto b = random_bf16(kDim * kDim, seed + 1, -2.f, 2.f);
  DevBuf<std::uint16_t> da(a.size()), db(b.size());
  DevBuf<float> dc(kDim * kDim);
  da.upload(a);
  db.upload(b);
  wgmma_64x64x64<kTransB><<<1, 128>>>(da.p, db.p, dc.p);
  TPB_CUDA_CHECK(cudaGetLastError());
  expect_product(
      a, [&](int k, int n) { return bf16_to_float(kTransB ? b[k * kDim + n] : b[n * kDim + k]); }, dc.download(), kDim,
      kTransB ? " (B MN-major)" : " (B K-major)");
}

TEST(GpuWgmma, ProductWithBKMajor) {
  TPB_REQUIRE_GPU();
  if (const std::string why = no_wgmma_here(); !why.empty()) GTEST_SKIP() << why;
  check_product<0>(901);
}

TEST(GpuWgmma, ProductWithBMnMajor) {
  TPB_REQUIRE_GPU();
  if (const std::string why = no_wgmma_here(); !why.empty()) GTEST_SKIP() << why;
  check_product<1>(902);
}

// C[64 x 256] = A[64 x 64] * B[64 x 256], A from registers (each warp's m16n8k16 A fragments,
// read from global memory), B MN-major ([K][N]) in shared memory as four 64-column blocks of
// [64 K rows][64] 8 KB apart: the descriptor's LBO (the block stride along N) is what this
// checks beyond ProductWithBMnMajor, and the register-A fragment layout.
constexpr int kWideN = 256;
__global__ void __launch_bounds__(128) wgmma_rs_64x256x64(const std::uint16_t* a, const std::uint16_t* b, float* c) {
#if TPB_WGMMA_COMPILED
  extern __shared__ __align__(1024) unsigned char b_s[];  // [4 blocks][64 K rows][128 bytes]
  for (int i = threadIdx.x; i < kDim * kWideN; i += blockDim.x) {
    const int k = i / kWideN, n = i % kWideN;
    *reinterpret_cast<std::uint16_t*>(b_s + (n / 64) * 8192 + gpu::detail::sw128_offset(k, n % 64)) = b[i];
  }
  gpu::detail::fence_proxy_async();
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q2 = 2 * (lane % 4);
  const int r0 = 16 * warp + g;
  auto pair = [&](int row, int col) {
    return static_cast<std::uint32_t>(a[row * kDim + col]) | (static_cast<std::uint32_t>(a[row * kDim + col + 1]) << 16);
  };
  const std::uint32_t b_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(b_s));
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  std::uint32_t frag[kDim / 16][4];
#pragma unroll
  for (int k = 0; k < kDim / 16; ++k) {
    frag[k][0] = pair(r0, 16 * k + q2);
    frag[k][1] = pair(r0 + 8, 16 * k + q2);
    frag[k][2] = pair(r0, 16 * k + 8 + q2);
    frag[k][3] = pair(r0 + 8, 16 * k + 8 + q2);
  }
  gpu::detail::wgmma_fence();
#pragma unroll
  for (int k = 0; k < kDim / 16; ++k)
    gpu::detail::wgmma_m64n256k16_rs_bmn(d, frag[k], gpu::detail::sw128_desc(b_addr + 2048 * k, 8192, 1024), 1);
  gpu::detail::wgmma_commit();
  gpu::detail::wgmma_wait<0>();
  store_accumulator<kWideN>(d, c);
#else
  __trap();  // not launched outside sm_90a (wgmma.cuh)
#endif
}

TEST(GpuWgmma, ProductWithARegistersAndWideBMnMajor) {
  TPB_REQUIRE_GPU();
  if (const std::string why = no_wgmma_here(); !why.empty()) GTEST_SKIP() << why;
  const auto a = random_bf16(kDim * kDim, 903, -2.f, 2.f);
  const auto b = random_bf16(kDim * kWideN, 904, -2.f, 2.f);
  DevBuf<std::uint16_t> da(a.size()), db(b.size());
  DevBuf<float> dc(kDim * kWideN);
  da.upload(a);
  db.upload(b);
  constexpr int kSmem = kDim * kWideN * 2;
  TPB_CUDA_CHECK(cudaFuncSetAttribute(wgmma_rs_64x256x64, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  wgmma_rs_64x256x64<<<1, 128, kSmem>>>(da.p, db.p, dc.p);
  TPB_CUDA_CHECK(cudaGetLastError());
  expect_product(a, [&](int k, int n) { return bf16_to_float(b[k * kWideN + n]); }, dc.download(), kWideN, "");
}

}  // namespace
}  // namespace tpb::test
