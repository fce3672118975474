// GpuEngine's private parts, shared by the files that implement it (gpu_engine_weights.cpp,
// gpu_engine_buffers.cpp, gpu_engine_steps.cpp, gpu_engine_forward.cpp): the device weights
// and buffers (GpuEngine::Impl) and the few helpers more than one of them uses. Not for use
// outside reference_engine/gpu/gpu_engine_*.cpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "reference_engine/gpu/gpu_engine.h"
#include "reference_engine/memory/attention_widths.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/linear.h"

namespace tpb {
namespace gpu_engine_internal {

using bf16 = __nv_bfloat16;
inline constexpr std::size_t kBf16 = sizeof(bf16);

// Throws InputError unless f is 0 (exact KV cache) or in (0, 1] (gpu_engine_buffers.cpp).
void check_mem_fraction(double f);

// This rank's device memory (current_device_memory: cudaMemGetInfo alone on a GPU, its share
// of the device in shared placement): free bytes; *total_out gets the total.
std::int64_t device_free_bytes(std::int64_t* total_out);

// A layer's routed experts of one kind (gate|up or down) in INT4 (device_weights.h): expert e's
// [out, in] at packed + e x out x in / 8 and scales + e x out x in / 32.
struct Int4Experts {
  const std::uint32_t* packed = nullptr;
  const bf16* scales = nullptr;
};

struct LayerW {
  bf16* input_norm = nullptr;      // [H]
  bf16* post_norm = nullptr;       // [H]
  bf16* q_a = nullptr;             // [q_lora, H]
  bf16* q_a_norm = nullptr;        // [q_lora]
  bf16* q_b = nullptr;             // [heads * qk, q_lora or H]
  bf16* kv_a = nullptr;            // [lora + rope, H]
  bf16* kv_a_norm = nullptr;       // [lora]
  bf16* kv_b = nullptr;            // [heads * (nope + v), lora]
  bf16* o = nullptr;               // [H, heads * v]
  bool moe = false;
  bf16* mlp_gate_up = nullptr;     // [2 * inter_local, H]: gate rows then up rows (dense MLP or shared experts)
  bf16* mlp_down = nullptr;        // [H, inter_local]
  std::int64_t mlp_inter = 0;      // inter_local of mlp_*
  bf16* router = nullptr;          // [E, H] (bf16: see gpu_engine.h)
  float* router_bias = nullptr;    // [E]
  bf16* experts_gate_up = nullptr; // [E][2 * moe_inter_local, H], contiguous
  bf16* experts_down = nullptr;    // [E][H, moe_inter_local], contiguous
  Int4Experts experts_gate_up_int4;  // an int4 model's routed experts instead of the two above
  Int4Experts experts_down_int4;
};

// Where stream `s` stands with graph capture (cudaStreamIsCapturing, checked).
inline cudaStreamCaptureStatus capture_status(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TPB_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  return status;
}

// A second stream for work a step runs beside the engine's stream (the shared experts beside
// the router and the routed experts; the latent cache row beside q's projections and q's rope
// beside the absorbed query, in mla_project): forked from it and joined back by events, so that a
// captured step holds two branches and an eager step runs them concurrently. The branch has its
// own Linear, so two cuBLASLt calls never share a workspace. Its work is always joined before
// the step ends, so synchronizing the engine's stream waits for it too.
class SideBranch {
 public:
  SideBranch() {
    TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TPB_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    TPB_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  }
  ~SideBranch() {
    cudaEventDestroy(join_);
    cudaEventDestroy(fork_);
    cudaStreamDestroy(stream_);
  }
  SideBranch(const SideBranch&) = delete;
  SideBranch& operator=(const SideBranch&) = delete;

  // The branch's work starts after everything queued on `main` so far.
  cudaStream_t begin(cudaStream_t main) {
    TPB_CUDA_CHECK(cudaEventRecord(fork_, main));
    TPB_CUDA_CHECK(cudaStreamWaitEvent(stream_, fork_, 0));
    return stream_;
  }
  // Work queued on `main` from now on starts after the branch's.
  void join(cudaStream_t main) {
    TPB_CUDA_CHECK(cudaEventRecord(join_, stream_));
    TPB_CUDA_CHECK(cudaStreamWaitEvent(main, join_, 0));
  }
  // join() on the way out of a failed step: the error in flight is the one to report, so this
  // one's own errors are dropped.
  void join_after_error(cudaStream_t main) noexcept {
    if (cudaEventRecord(join_, stream_) == cudaSuccess) cudaStreamWaitEvent(main, join_, 0);
  }
  gpu::Linear linear;

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

}  // namespace gpu_engine_internal

struct GpuEngine::Impl {
  using bf16 = gpu_engine_internal::bf16;
  using LayerW = gpu_engine_internal::LayerW;

  std::vector<void*> weight_allocations;  // freed with the engine
  std::vector<void*> buffer_allocations;  // KV cache and activations: freed by resize()
  std::vector<void*>* target = &weight_allocations;
  std::size_t bytes = 0;  // counted by the caller per phase
  gpu::Linear linear;
  gpu_engine_internal::SideBranch side;  // gpu_engine_forward.cpp: ffn's shared experts, mla_project
  // The attention kernels' widths (reference_engine/memory/attention_widths.h), set once at
  // construction: the cache row, q_lat and the prefill head dims, padded where the kernels need it.
  AttentionWidths widths;

  // weights
  bf16* embed = nullptr;       // [vocab_local, H]
  bf16* lm_head = nullptr;     // [vocab_local, H]
  bf16* final_norm = nullptr;  // [H]
  std::vector<LayerW> layers;
  float* inv_freq = nullptr;   // [rope / 2]

  // KV cache: [layers][max_batch, max_len, cache row], the row lora | rope padded as
  // attention_widths() says (reference_engine/memory/attention_widths.h; zero pads)
  bf16* cache = nullptr;

  // step inputs (fixed addresses: a captured graph reads them)
  std::int32_t* ids = nullptr;        // [max_tokens]
  std::int32_t* positions = nullptr;  // [max_tokens]
  std::int32_t* seq_lens = nullptr;   // [max_batch]

  // activations
  float* residual = nullptr;  // [T, H]
  bf16* delta = nullptr;      // [T, H]: embedding / o_proj / FFN outputs (allreduced in place)
  bf16* xn = nullptr;         // [T, H]
  bf16* qa = nullptr;         // [T, q_lora]
  bf16* qa_n = nullptr;       // [T, q_lora]
  bf16* q = nullptr;          // [T, heads, qk]
  bf16* ckv = nullptr;        // [T, lora + rope] kv_a output
  bf16* kvrow = nullptr;      // [T, cache row] normed latent | rotated k_rot (the cache rows; zero pads)
  bf16* kv = nullptr;         // [T, heads, nope + v] prefill expansion
  bf16* k_nope = nullptr;     // [T, heads, padded nope] (zero pads)
  bf16* v = nullptr;          // [T, heads, padded v] (zero pads)
  bf16* k_rot = nullptr;      // [T, rope]
  bf16* q_prefill = nullptr;  // [T, heads, padded nope + rope]: q with zero pads (odd nope only)
  bf16* attn_prefill = nullptr;  // [T, heads, padded v]: prefill attention's output (odd v only)
  bf16* qdec = nullptr;       // [max_batch, heads, cache row] (zero pads)
  bf16* o_lat = nullptr;      // [max_batch, heads, padded lora]
  void* decode_ws = nullptr;
  std::size_t decode_ws_bytes = 0;
  bf16* attn = nullptr;       // [T, heads * v]
  bf16* gate_up = nullptr;    // [T, 2 * max inter_local]
  bf16* act = nullptr;        // [T, max inter_local]
  bf16* shared_out = nullptr; // [T, H]
  float* router_logits = nullptr;  // [T, E]
  std::int32_t* topk_idx = nullptr;  // [T, K]
  float* topk_w = nullptr;           // [T, K]
  std::int32_t* offsets = nullptr;   // [E + 1]
  unsigned long long* expert_reads = nullptr;  // [layers]: routed experts each layer's MoE calls read since the buffers were allocated
  std::int32_t* sorted_pairs = nullptr;  // [T * K]
  std::int32_t* position_of = nullptr;   // [T * K]
  bf16* x_sorted = nullptr;   // [T * K, H]
  bf16* gu_sorted = nullptr;  // [T * K, 2 * moe_inter_local]
  bf16* act_sorted = nullptr; // [T * K, moe_inter_local]
  bf16* y_sorted = nullptr;   // [T * K, H]
  float* logits_local = nullptr;  // [T, vocab_local]
  float* gathered = nullptr;      // [tp, T, vocab_local]

  // A buffer with padding columns (`padded`), which must read as zeros: cleared once here, and
  // no kernel writes them later (each writes only the model's own columns). Unpadded: as alloc.
  template <class T>
  T* alloc_padded(std::int64_t count, bool padded) {
    T* p = alloc<T>(count);
    if (padded && p != nullptr) TPB_CUDA_CHECK(cudaMemset(p, 0, static_cast<std::size_t>(count) * sizeof(T)));
    return p;
  }
  template <class T>
  T* alloc(std::int64_t count) {
    if (count <= 0) return nullptr;
    void* p = nullptr;
    const std::size_t n = static_cast<std::size_t>(count) * sizeof(T);
    TPB_CUDA_CHECK(cudaMalloc(&p, n));
    target->push_back(p);
    bytes += n;
    return static_cast<T*>(p);
  }

  void free_buffers() {
    for (void* p : buffer_allocations) cudaFree(p);
    buffer_allocations.clear();
  }
  ~Impl() {
    free_buffers();
    for (void* p : weight_allocations) cudaFree(p);
  }

  // q, the cache rows (normed latent | rotated k_rot) and the cache write: the part of MLA both
  // forms share. T = tokens of the step (gpu_engine_forward.cpp). q_rot_into_qdec (decode):
  // the rotated q_rot also lands in qdec's rope slots. The cache row and q's rope run on the
  // side branch, beside q's projections and then beside `beside_rope`, and are joined before it
  // returns. `beside_rope` queues work on s that runs concurrently with both: it may read q's
  // nope slices and write qdec's latent columns, and must not touch q's rope slice, qdec's rope
  // slots, kvrow or the cache.
  void mla_project(const LayerW& lw, const ModelConfig& c, std::int64_t heads, std::int64_t T, std::int64_t n,
                   bf16* cache_layer, std::int64_t max_len, float rope_factor, bool q_rot_into_qdec, cudaStream_t s,
                   const std::function<void()>& beside_rope);
};

}  // namespace tpb
