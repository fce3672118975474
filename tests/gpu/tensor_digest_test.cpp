// The `digests` level's GPU kernels (tpb/kernels/gpu/tensor_digest.h) against their CPU
// reference on fresh random inputs: the digest and the sample bit for bit, for every dtype, at
// sizes below one block, at the grid cap and far past it (grid-stride); the test-only scaling
// as the reference rounds it; and the digest kernels captured in a CUDA graph, replayed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_support.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/gpu/tensor_digest.h"
#include "tpb/kernels/tensor_digest.h"

namespace tpb::test {
namespace {

// `n` random elements of `dtype` as raw bytes, in [-4, 4).
std::vector<unsigned char> random_tensor(std::size_t n, DType dtype, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<unsigned char> bytes(n * dtype_size(dtype));
  for (std::size_t i = 0; i < n; ++i) {
    const float f = u(rng);
    if (dtype == DType::f32) {
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    } else {
      const std::uint16_t b = dtype == DType::bf16 ? float_to_bf16(f) : float_to_f16(f);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
  }
  return bytes;
}

struct DigestOut {
  std::uint64_t digest = 0;
  std::vector<float> samples = std::vector<float>(kernels::kTensorSamples);
};

DigestOut gpu_digest(const std::vector<unsigned char>& host, std::size_t n, DType dtype) {
  DevBuf<unsigned char> data(host.size());
  DevBuf<std::uint64_t> partials(gpu::kTensorDigestBlocks), digest(1);
  DevBuf<float> samples(kernels::kTensorSamples);
  TPB_CUDA_CHECK(cudaMemcpy(data.p, host.data(), host.size(), cudaMemcpyHostToDevice));
  gpu::tensor_digest(data.p, n, dtype, partials.p, digest.p, samples.p, nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  DigestOut out;
  TPB_CUDA_CHECK(cudaMemcpy(&out.digest, digest.p, 8, cudaMemcpyDeviceToHost));
  TPB_CUDA_CHECK(cudaMemcpy(out.samples.data(), samples.p, kernels::kTensorSamples * 4, cudaMemcpyDeviceToHost));
  return out;
}

TEST(GpuTensorDigest, MatchesTheCpuReferenceBitForBit) {
  TPB_REQUIRE_GPU();
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{257}, std::size_t{256 * 256},
                          std::size_t{7168 * 33 + 5}, std::size_t{10'000'019}}) {
      const auto host = random_tensor(n, dtype, static_cast<std::uint32_t>(n * 7 + static_cast<int>(dtype)));
      const DigestOut got = gpu_digest(host, n, dtype);
      EXPECT_EQ(got.digest, kernels::tensor_digest_ref(host.data(), n, dtype)) << dtype_name(dtype) << " n " << n;
      std::vector<float> want(kernels::kTensorSamples);
      kernels::tensor_samples_ref(host.data(), n, dtype, want.data());
      for (int s = 0; s < kernels::kTensorSamples; ++s) {
        if (std::isnan(want[s])) {
          EXPECT_TRUE(std::isnan(got.samples[s])) << s;
        } else {
          EXPECT_EQ(got.samples[s], want[s]) << dtype_name(dtype) << " n " << n << " sample " << s;
        }
      }
    }
  }
}

TEST(GpuTensorDigest, ScaleValuesMatchesTheReference) {
  TPB_REQUIRE_GPU();
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const std::size_t n = 100'003;
    auto host = random_tensor(n, dtype, 99);
    DevBuf<unsigned char> data(host.size());
    TPB_CUDA_CHECK(cudaMemcpy(data.p, host.data(), host.size(), cudaMemcpyHostToDevice));
    gpu::scale_values(data.p, n, dtype, 1.0625f, nullptr);
    std::vector<unsigned char> got(host.size());
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    TPB_CUDA_CHECK(cudaMemcpy(got.data(), data.p, got.size(), cudaMemcpyDeviceToHost));
    kernels::scale_values_ref(host.data(), n, dtype, 1.0625f);
    EXPECT_EQ(got, host) << dtype_name(dtype);
  }
}

// Captured once, replayed on new data at the same address: the slot holds the last replay's
// digest (what the digests level records for a graph-mode decode).
TEST(GpuTensorDigest, RunsInsideACapturedGraph) {
  TPB_REQUIRE_GPU();
  const std::size_t n = 7168 * 4;
  DevBuf<unsigned char> data(n * 2);
  DevBuf<std::uint64_t> partials(gpu::kTensorDigestBlocks), digest(1);
  DevBuf<float> samples(kernels::kTensorSamples);
  cudaStream_t stream = nullptr;
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  TPB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  gpu::tensor_digest(data.p, n, DType::bf16, partials.p, digest.p, samples.p, stream);
  TPB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (std::uint32_t seed : {1u, 2u}) {
    const auto host = random_tensor(n, DType::bf16, seed);
    TPB_CUDA_CHECK(cudaMemcpy(data.p, host.data(), host.size(), cudaMemcpyHostToDevice));
    TPB_CUDA_CHECK(cudaDeviceSynchronize());  // a pageable copy is not ordered with `stream`
    TPB_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::uint64_t got = 0;
    TPB_CUDA_CHECK(cudaMemcpy(&got, digest.p, 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, kernels::tensor_digest_ref(host.data(), n, DType::bf16)) << "replay with seed " << seed;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace tpb::test
