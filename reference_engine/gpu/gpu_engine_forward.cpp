// The GPU forward pass (see gpu_engine.h): bf16 activations; bf16 weights, or INT4 routed
// experts. Buffers are token-major: [tokens, features] with token t = b * n + i for sequence b
// and new-token index i, as in the CPU engine.
#include "reference_engine/gpu/gpu_engine_impl.h"

#include <algorithm>

#include "tpb/kernels/gpu/embedding.h"
#include "tpb/kernels/gpu/expert_gemm.h"
#include "tpb/kernels/gpu/expert_gemm_int4.h"
#include "tpb/kernels/gpu/mla_decode.h"
#include "tpb/kernels/gpu/mla_kv_row.h"
#include "tpb/kernels/gpu/mla_prefill.h"
#include "tpb/kernels/gpu/moe_dispatch.h"
#include "tpb/kernels/gpu/moe_router.h"
#include "tpb/kernels/gpu/rmsnorm.h"
#include "tpb/kernels/gpu/rope_yarn.h"
#include "tpb/kernels/gpu/silu_and_mul.h"

namespace tpb {

using gpu_engine_internal::bf16;
using gpu_engine_internal::kBf16;
using gpu_engine_internal::LayerW;

void GpuEngine::all_reduce_bf16(__nv_bfloat16* buf, std::int64_t tokens) {
  const std::size_t count = static_cast<std::size_t>(tokens * config_.hidden_size);
  comm_->all_reduce(buf, buf, count, DType::bf16, stream_);
  ++stats_.all_reduces;
  stats_.all_reduce_bytes += static_cast<std::int64_t>(count * kBf16);
}

void GpuEngine::forward(std::int64_t n, bool decode_step) {
  TPB_CHECK(comm_ != nullptr, "gpu engine: no communicator (forget_communicator without set_communicator)");
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const std::int64_t H = c.hidden_size, T = batch_ * n;
  const float eps = static_cast<float>(c.rms_norm_eps);

  phase_mark(0);
  gpu::embedding_gather(m.ids, T, m.embed, dims_.vocab_begin, dims_.vocab_begin + dims_.vocab, H, m.delta, stream_);
  all_reduce_bf16(m.delta, T);
  gpu::residual_from_bf16(m.delta, m.residual, T * H, stream_);
  phase_mark(1);
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerW& lw = m.layers[l];
    // Layer 0's residual is the embedding itself; later layers add the previous FFN output.
    gpu::add_rmsnorm(l == 0 ? nullptr : m.delta, m.residual, lw.input_norm, m.xn, T, H, eps, stream_);
    if (decode_step)
      attention_decode(l);
    else
      attention_prefill(l, n);
    all_reduce_bf16(m.delta, T);
    gpu::add_rmsnorm(m.delta, m.residual, lw.post_norm, m.xn, T, H, eps, stream_);
    ffn(l, T, decode_step);
    all_reduce_bf16(m.delta, T);
    phase_mark(static_cast<std::size_t>(2 + l));
  }
  gpu::add_rmsnorm(m.delta, m.residual, m.final_norm, m.xn, T, H, eps, stream_);
  const bf16* head_in = m.xn;
  std::int64_t rows = T;
  if (options_.last_position_logits && n > 1) {
    // Each sequence's last row, packed into delta (dead once the final norm has read it).
    TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.delta, H * sizeof(bf16), m.xn + (n - 1) * H, n * H * sizeof(bf16),
                                     H * sizeof(bf16), batch_, cudaMemcpyDeviceToDevice, stream_));
    head_in = m.delta;
    rows = batch_;
  }
  m.linear.f32_out(head_in, H, m.lm_head, m.logits_local, dims_.vocab, rows, H, dims_.vocab, stream_);
  comm_->all_gather(m.logits_local, m.gathered, static_cast<std::size_t>(rows * dims_.vocab), DType::f32, stream_);
  ++stats_.all_gathers;
  phase_mark(static_cast<std::size_t>(2 + c.num_hidden_layers));
  stats_.tokens += T;
  last_tokens_ = rows;
  logits_valid_ = false;
}

void GpuEngine::Impl::mla_project(const LayerW& lw, const ModelConfig& c, std::int64_t heads, std::int64_t T,
                                  std::int64_t n, bf16* cache_layer, std::int64_t max_len, float rope_factor,
                                  bool q_rot_into_qdec, cudaStream_t s, const std::function<void()>& beside_rope) {
  Impl& m = *this;
  const std::int64_t H = c.hidden_size, qk = c.qk_head_dim(), lora = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  const std::int64_t width = lora + rope, ql = c.q_lora_rank;
  const AttentionWidths& a = widths;  // kvrow's row: lora | rope at a.lora (zero pads)
  const std::int64_t row = a.cache_row();
  const float eps = static_cast<float>(c.rms_norm_eps);
  // q's first projection and kv_a read the same xn: one launch at one row (Linear::bf16_out_pair).
  if (ql > 0)
    m.linear.bf16_out_pair(m.xn, T, H, lw.q_a, m.qa, ql, lw.kv_a, m.ckv, width, s);
  else
    m.linear.bf16_out_pair(m.xn, T, H, lw.q_b, m.q, heads * qk, lw.kv_a, m.ckv, width, s);
  // Two small kernels leave the critical path (each a few us of latency at batch 1): the cache
  // row, which reads only ckv, runs beside q's norm and second projection, and q's rope beside
  // `beside_rope` (decode's absorbed query, which reads q's nope slice and writes qdec's latent
  // columns; the rope rotates q's rope slice in place and writes it into qdec's rope slots). The
  // same kernels on the same inputs: the bits do not change.
  bool forked = false;
  try {
    // One launch for rmsnorm + copy of the rope slice + rope + kv_cache_write, bitwise the same
    // (mla_kv_row.h): the latent rows land in kvrow (prefill expands them) and in the cache.
    cudaStream_t side = m.side.begin(s);
    forked = true;
    const gpu::MlaKvRowShape kv_shape{T, n, lora, rope, a.lora, row, max_len};
    gpu::mla_kv_row(m.ckv, lw.kv_a_norm, eps, m.positions, m.inv_freq, rope_factor, kv_shape, m.kvrow, cache_layer,
                    side);
    if (ql > 0) {
      gpu::rmsnorm(m.qa, ql, lw.q_a_norm, m.qa_n, ql, T, ql, eps, s);
      m.linear.bf16_out(m.qa_n, ql, lw.q_b, m.q, heads * qk, T, ql, heads * qk, s);
    }
    // Decode's absorbed query takes q_rot in its rope slots (qdec rows are heads * row, token-major
    // as q's vectors): rotated there in the same launch instead of copied after.
    side = m.side.begin(s);  // after q's projections too
    bf16* const q_rot = m.q + c.qk_nope_head_dim;
    if (q_rot_into_qdec)
      gpu::rope_interleaved_copy(q_rot, T * heads, qk, heads, m.positions, m.inv_freq, rope / 2, rope_factor,
                                 m.qdec + a.lora, row, side);
    else
      gpu::rope_interleaved(q_rot, T * heads, qk, heads, m.positions, m.inv_freq, rope / 2, rope_factor, side);
    if (beside_rope) beside_rope();
  } catch (...) {
    if (forked) m.side.join_after_error(s);
    throw;
  }
  m.side.join(s);
}

void GpuEngine::attention_prefill(std::int64_t layer, std::int64_t n) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const LayerW& lw = m.layers[layer];
  const std::int64_t H = c.hidden_size, heads = dims_.heads, T = batch_ * n;
  const std::int64_t lora = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  const std::int64_t nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = nope + vd, qk = c.qk_head_dim();
  const AttentionWidths& a = m.widths;  // pads: zero columns (attention_widths.h)
  TPB_CHECK(length_ == 0, "gpu prefill starts new sequences (chunked prefill is not implemented)");
  bf16* cache_layer = m.cache + layer * options_.max_batch * options_.max_len * a.cache_row();
  m.mla_project(lw, c, heads, T, n, cache_layer, options_.max_len, rope_factor_, false, stream_, {});

  // Plain form, as HF: expand the new latents through kv_b_proj into k_nope | v per head.
  m.linear.bf16_out(m.kvrow, a.cache_row(), lw.kv_b, m.kv, heads * kvr, T, lora, heads * kvr, stream_);
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.k_nope, a.nope * kBf16, m.kv, kvr * kBf16, nope * kBf16, T * heads,
                                   cudaMemcpyDeviceToDevice, stream_));
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.v, a.v * kBf16, m.kv + nope, kvr * kBf16, vd * kBf16, T * heads,
                                   cudaMemcpyDeviceToDevice, stream_));
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.k_rot, rope * kBf16, m.kvrow + a.lora, a.cache_row() * kBf16, rope * kBf16, T,
                                   cudaMemcpyDeviceToDevice, stream_));
  // An odd nope: q's heads move into rows of padded nope | rope; an odd v: the attention
  // writes padded rows, compacted for o_proj below.
  const bf16* q = m.q;
  if (a.nope != nope) {
    const std::int64_t qp = a.nope + rope;
    TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.q_prefill, qp * kBf16, m.q, qk * kBf16, nope * kBf16, T * heads,
                                     cudaMemcpyDeviceToDevice, stream_));
    TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.q_prefill + a.nope, qp * kBf16, m.q + nope, qk * kBf16, rope * kBf16, T * heads,
                                     cudaMemcpyDeviceToDevice, stream_));
    q = m.q_prefill;
  }
  const gpu::MlaPrefillShape shape{batch_, n, 0, heads, a.nope, rope, a.v};
  gpu::mla_prefill_attention(q, m.k_nope, m.k_rot, m.v, shape, attention_scale_, a.v != vd ? m.attn_prefill : m.attn,
                             stream_);
  if (a.v != vd)
    TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.attn, vd * kBf16, m.attn_prefill, a.v * kBf16, vd * kBf16, T * heads,
                                     cudaMemcpyDeviceToDevice, stream_));
  m.linear.bf16_out(m.attn, heads * vd, lw.o, m.delta, H, T, heads * vd, H, stream_);
}

void GpuEngine::attention_decode(std::int64_t layer) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const LayerW& lw = m.layers[layer];
  const std::int64_t H = c.hidden_size, heads = dims_.heads, B = batch_, qk = c.qk_head_dim();
  const std::int64_t lora = c.kv_lora_rank;
  const std::int64_t nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = nope + vd;
  // The cache row and q_lat are lora | rope, each padded (attention_widths.h): the pads of q
  // are zero, so whatever the cache pads hold adds nothing to a score, and o_lat's padded
  // columns are never read.
  const AttentionWidths& a = m.widths;
  const std::int64_t row = a.cache_row();
  bf16* cache_layer = m.cache + layer * options_.max_batch * options_.max_len * row;
  // Absorbed form: q_lat[b, h] = q_nope[b, h] · W_UK_h, W_UK_h = kv_b rows [h*kvr, h*kvr + nope)
  // stored [nope (in), lora (out)]: w_trans. It writes qdec's first lora columns, beside
  // mla_project's rope, which puts the rotated q_rot in the rope slots at a.lora.
  m.mla_project(lw, c, heads, B, 1, cache_layer, options_.max_len, rope_factor_, true, stream_, [&] {
    m.linear.bf16_out_batched(m.q, heads * qk, qk, lw.kv_b, true, lora, kvr * lora, m.qdec, heads * row, row, heads,
                              B, nope, lora, stream_);
  });
  const gpu::MlaDecodeShape shape{B, heads, a.lora, a.rope, options_.max_len};
  gpu::mla_decode_attention(m.qdec, cache_layer, m.seq_lens, shape, attention_scale_, m.decode_ws, m.decode_ws_bytes,
                            m.o_lat, stream_);
  // o[b, h] = o_lat[b, h] · W_UV_h^T, W_UV_h = kv_b rows [h*kvr + nope, (h+1)*kvr) stored [v (out), lora (in)].
  m.linear.bf16_out_batched(m.o_lat, heads * a.lora, a.lora, lw.kv_b + nope * lora, false, lora, kvr * lora, m.attn,
                            heads * vd, vd, heads, B, lora, vd, stream_);
  m.linear.bf16_out(m.attn, heads * vd, lw.o, m.delta, H, B, heads * vd, H, stream_);
}

void GpuEngine::ffn(std::int64_t layer, std::int64_t T, bool grouped) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const LayerW& lw = m.layers[layer];
  const std::int64_t H = c.hidden_size;
  // Dense MLP, or the shared experts: down(silu(gate) * up) over the fused gate|up GEMM.
  auto mlp = [&](bf16* out, gpu::Linear& linear, cudaStream_t s) {
    const std::int64_t I = lw.mlp_inter;
    linear.bf16_out(m.xn, H, lw.mlp_gate_up, m.gate_up, 2 * I, T, H, 2 * I, s);
    gpu::silu_and_mul(m.gate_up, m.act, T, I, s);
    linear.bf16_out(m.act, I, lw.mlp_down, out, H, T, I, H, s);
  };
  if (!lw.moe) {
    mlp(m.delta, m.linear, stream_);
    return;
  }
  // count_expert_hits is diagnostics only (tests comparing routing with the CPU engine): a
  // synchronous copy in routed_experts, so never inside a captured step. Checked before the
  // side branch forks.
  TPB_CHECK(!options_.count_expert_hits || gpu_engine_internal::capture_status(stream_) == cudaStreamCaptureStatusNone,
            "count_expert_hits cannot run inside a CUDA graph");
  // The shared experts run on the side branch, beside the router, the dispatch and the routed
  // experts (disjoint buffers: gate_up, act, shared_out there; router_logits .. y_sorted here),
  // joined before combine. (Measured with the other batch-1 changes of 2026-12-02, not alone:
  // docs/performance.md.) Whatever throws in between joins it first, so that no work of the
  // branch outlives the step and a capture never ends with the branch unjoined.
  const bool shared = c.n_shared_experts > 0;
  bool forked = false;
  try {
    if (shared) {
      cudaStream_t side = m.side.begin(stream_);
      forked = true;
      mlp(m.shared_out, m.side.linear, side);
    }
    routed_experts(layer, T, grouped);
  } catch (...) {
    if (forked) m.side.join_after_error(stream_);
    throw;
  }
  if (shared) m.side.join(stream_);
  gpu::moe_combine(m.y_sorted, m.position_of, m.topk_w, shared ? m.shared_out : nullptr, T, c.num_experts_per_tok, H,
                   m.delta, stream_);
}

// Router, dispatch and the routed experts of MoE layer `layer` over the T rows of xn, into y_sorted.
void GpuEngine::routed_experts(std::int64_t layer, std::int64_t T, bool grouped) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const LayerW& lw = m.layers[layer];
  const std::int64_t H = c.hidden_size;
  const std::int64_t E = c.n_routed_experts, K = c.num_experts_per_tok, I = dims_.moe_intermediate, P = T * K;
  m.linear.f32_out(m.xn, H, lw.router, m.router_logits, E, T, H, E, stream_);
  const kernels::RouterParams rp{E, K, c.n_group, c.topk_group, c.norm_topk_prob,
                                 static_cast<float>(c.routed_scaling_factor)};
  gpu::moe_route_noaux_tc(m.router_logits, lw.router_bias, T, rp, m.topk_idx, m.topk_w, stream_);
  if (options_.count_expert_hits) {
    std::vector<std::int32_t> idx(static_cast<std::size_t>(T * K));
    TPB_CUDA_CHECK(cudaMemcpyAsync(idx.data(), m.topk_idx, sizeof(std::int32_t) * idx.size(), cudaMemcpyDeviceToHost, stream_));
    synchronize();
    if (stats_.expert_hits.empty()) stats_.expert_hits.assign(static_cast<std::size_t>(E), 0);
    for (std::int32_t e : idx) ++stats_.expert_hits[static_cast<std::size_t>(e)];
    stats_.routing.insert(stats_.routing.end(), idx.begin(), idx.end());
  }
  gpu::moe_dispatch_plan(m.topk_idx, T, K, E, m.offsets, m.sorted_pairs, m.position_of, stream_, m.expert_reads + layer);
  gpu::moe_gather(m.xn, m.sorted_pairs, P, K, H, m.x_sorted, stream_);
  if (c.quant == Quantization::int4) {
    const gpu::Int4ExpertWeights gate_up{lw.experts_gate_up_int4.packed, lw.experts_gate_up_int4.scales, H, 2 * I};
    const gpu::Int4ExpertWeights down{lw.experts_down_int4.packed, lw.experts_down_int4.scales, I, H};
    // The tile kernel pays off from about 64 rows per expert (one H100: gate_up of one expert
    // with <= 64 rows ~110 us flat in it, far less in the grouped one; 4096 tokens of Kimi at
    // TP 1: 181 TFLOP/s against 70). Decided from (pairs, experts) alone: the same on every rank.
    constexpr std::int64_t kTileRowsPerExpert = 64;
    const bool tiles = !grouped && P >= kTileRowsPerExpert * std::min(E, P);
    auto gemm = tiles ? gpu::expert_gemm_int4_prefill : gpu::expert_gemm_int4_grouped;
    gemm(m.x_sorted, m.offsets, E, P, gate_up, m.gu_sorted, stream_);
    gpu::silu_and_mul(m.gu_sorted, m.act_sorted, P, I, stream_);
    gemm(m.act_sorted, m.offsets, E, P, down, m.y_sorted, stream_);
  } else if (grouped) {
    gpu::expert_gemm_grouped(m.x_sorted, m.offsets, E, P, lw.experts_gate_up, 2 * I * H, H, 2 * I, m.gu_sorted,
                             stream_);
    gpu::silu_and_mul(m.gu_sorted, m.act_sorted, P, I, stream_);
    gpu::expert_gemm_grouped(m.act_sorted, m.offsets, E, P, lw.experts_down, H * I, I, H, m.y_sorted, stream_);
  } else {
    gpu::expert_gemm_per_expert(m.linear, m.x_sorted, m.offsets, E, lw.experts_gate_up, 2 * I * H, H, 2 * I,
                                m.gu_sorted, stream_);
    gpu::silu_and_mul(m.gu_sorted, m.act_sorted, P, I, stream_);
    gpu::expert_gemm_per_expert(m.linear, m.act_sorted, m.offsets, E, lw.experts_down, H * I, I, H, m.y_sorted,
                                stream_);
  }
}

}  // namespace tpb
