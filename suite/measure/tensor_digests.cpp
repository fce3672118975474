#include "suite/measure/tensor_digests.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tpb/check.h"
#include "tpb/kernels/tensor_digest.h"

#if TPB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/tensor_digest.h"
#endif

namespace tpb {

namespace {

constexpr std::size_t kSamples = kernels::kTensorSamples;

std::string hex(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace

TensorDigests::TensorDigests(std::size_t capacity, bool on_device, AllocationLedger& ledger)
    : capacity_(capacity), on_device_(on_device), meta_(capacity), in_(capacity, 0), out_(capacity, 0),
      samples_(capacity * kSamples, 0.0f) {
  ledger.add("tensor_digests", capacity * (sizeof(Meta) + 2 * sizeof(std::uint64_t) + kSamples * sizeof(float)));
  if (!on_device_) return;
#if TPB_HAVE_CUDA
  TPB_CUDA_CHECK(cudaMalloc(&d_in_, std::max<std::size_t>(capacity, 1) * sizeof(std::uint64_t)));
  TPB_CUDA_CHECK(cudaMalloc(&d_out_, std::max<std::size_t>(capacity, 1) * sizeof(std::uint64_t)));
  TPB_CUDA_CHECK(cudaMalloc(&d_samples_, std::max<std::size_t>(capacity, 1) * kSamples * sizeof(float)));
  TPB_CUDA_CHECK(cudaMalloc(&d_partials_, gpu::kTensorDigestBlocks * sizeof(std::uint64_t)));
  ledger.add("tensor_digests_device", capacity * (2 * sizeof(std::uint64_t) + kSamples * sizeof(float)) +
                                          gpu::kTensorDigestBlocks * sizeof(std::uint64_t));
#else
  TPB_CHECK(false, "tensor digests on a device: this tpbench was built without CUDA");
#endif
}

TensorDigests::~TensorDigests() {
#if TPB_HAVE_CUDA
  if (on_device_) {
    cudaFree(d_in_);
    cudaFree(d_out_);
    cudaFree(d_samples_);
    cudaFree(d_partials_);
  }
#endif
}

void TensorDigests::before(const void* in, std::size_t in_count, DType dtype, void* stream) {
  if (next_ >= capacity_) return;
  meta_[next_].in_count = in_count;
  if (!on_device_) {
    in_[next_] = kernels::tensor_digest_ref(in, in_count, dtype);
    return;
  }
#if TPB_HAVE_CUDA
  float* unused_samples = d_samples_ + next_ * kSamples;  // overwritten by after()
  gpu::tensor_digest(in, in_count, dtype, d_partials_, d_in_ + next_, unused_samples, static_cast<cudaStream_t>(stream));
#else
  (void)stream;
#endif
}

void TensorDigests::after(const char* op, const void* out, std::size_t out_count, DType dtype, void* stream) {
  if (next_ >= capacity_) {
    ++next_;
    return;
  }
  Meta& m = meta_[next_];
  m.op = op;
  m.dtype = dtype;
  m.out_count = out_count;
  if (!on_device_) {
    out_[next_] = kernels::tensor_digest_ref(out, out_count, dtype);
    kernels::tensor_samples_ref(out, out_count, dtype, samples_.data() + next_ * kSamples);
  } else {
#if TPB_HAVE_CUDA
    gpu::tensor_digest(out, out_count, dtype, d_partials_, d_out_ + next_, d_samples_ + next_ * kSamples,
                       static_cast<cudaStream_t>(stream));
#else
    (void)stream;
#endif
  }
  ++next_;
}

nlohmann::json TensorDigests::to_json() {
  const std::size_t n = slot();
#if TPB_HAVE_CUDA
  if (on_device_ && n > 0) {
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    TPB_CUDA_CHECK(cudaMemcpy(in_.data(), d_in_, n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
    TPB_CUDA_CHECK(cudaMemcpy(out_.data(), d_out_, n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
    TPB_CUDA_CHECK(cudaMemcpy(samples_.data(), d_samples_, n * kSamples * sizeof(float), cudaMemcpyDeviceToHost));
  }
#endif
  nlohmann::json entries = nlohmann::json::array();
  for (std::size_t i = 0; i < n; ++i) {
    nlohmann::json samples = nlohmann::json::array();
    for (std::size_t s = 0; s < kSamples; ++s) {
      const float v = samples_[i * kSamples + s];
      samples.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr));
    }
    const Meta& m = meta_[i];
    entries.push_back({{"call", i},
                       {"op", m.op},
                       {"dtype", std::string(dtype_name(m.dtype))},
                       {"in_count", m.in_count},
                       {"out_count", m.out_count},
                       {"in", hex(in_[i])},
                       {"out", hex(out_[i])},
                       {"samples", samples}});
  }
  return {{"calls", next_}, {"dropped", next_ - n}, {"samples_per_call", kSamples}, {"entries", entries}};
}

}  // namespace tpb
