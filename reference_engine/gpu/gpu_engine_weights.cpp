// GpuEngine, loading: the constructor loads this rank's shard of the weights onto the device,
// then sizes the KV cache and the step buffers (gpu_engine_buffers.cpp). Synthetic sources
// are generated on the device; others are read in fp32 on the host and converted.
#include "reference_engine/gpu/gpu_engine_impl.h"

#include <algorithm>
#include <optional>
#include <string>

#include "reference_engine/gpu/synthetic_window.h"
#include "reference_engine/model/rope_params.h"
#include "tpb/kernels/gpu/synthetic_fill.h"
#include "tpb/kernels/rope_yarn.h"

namespace tpb {

using gpu_engine_internal::bf16;
using gpu_engine_internal::LayerW;
using gpu_engine_internal::check_mem_fraction;
using gpu_engine_internal::device_free_bytes;
using synthetic::InitKind;

namespace {

// The requests load_model_weights (reference_engine/model/model_weights.cpp) makes, built the
// same way: same names, global shapes, windows, init kinds and fan-ins, so a synthetic source
// gives both engines the same model.
WeightRequest full_req(const std::string& name, std::vector<std::int64_t> shape, InitKind kind) {
  const std::int64_t fan_in = shape.size() == 2 ? shape[1] : 1;
  return full_tensor(name, std::move(shape), kind, fan_in);
}
WeightRequest rows_req(const std::string& name, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                       std::int64_t count, InitKind kind = InitKind::linear) {
  WeightRequest r = full_tensor(name, {rows, cols}, kind, cols);
  r.row_begin = begin;
  r.row_end = begin + count;
  return r;
}
WeightRequest cols_req(const std::string& name, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                       std::int64_t count) {
  WeightRequest r = full_tensor(name, {rows, cols}, InitKind::linear, cols);
  r.col_begin = begin;
  r.col_end = begin + count;
  return r;
}

// Fills device blocks from a WeightSource: on the device for a synthetic source, else through
// the host in fp32 and converted on the device (one rounding, as float_to_bf16).
class DeviceLoader {
 public:
  DeviceLoader(WeightSource& source, cudaStream_t stream)
      : source_(source), seed_(source.synthetic_seed()), stream_(stream) {}
  ~DeviceLoader() {
    if (staging_ != nullptr) cudaFree(staging_);
  }

  void bf16_block(const WeightRequest& r, bf16* dst) {
    if (seed_) {
      gpu::synthetic_fill_bf16(gpu::synthetic_window(r, *seed_), dst, r.cols(), stream_);
      return;
    }
    float* staged = stage(r);
    gpu::convert_f32_to_bf16(staged, dst, r.rows() * r.cols(), stream_);
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void f32_block(const WeightRequest& r, float* dst) {
    if (seed_) {
      gpu::synthetic_fill_f32(gpu::synthetic_window(r, *seed_), dst, r.cols(), stream_);
      return;
    }
    float* staged = stage(r);
    TPB_CUDA_CHECK(cudaMemcpyAsync(dst, staged, sizeof(float) * r.rows() * r.cols(), cudaMemcpyDeviceToDevice, stream_));
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  float* stage(const WeightRequest& r) {
    const std::size_t n = static_cast<std::size_t>(r.rows() * r.cols());
    host_.resize(n);
    source_.read(r, host_.data());
    if (n > staging_count_) {
      TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (staging_ != nullptr) TPB_CUDA_CHECK(cudaFree(staging_));
      staging_ = nullptr;
      TPB_CUDA_CHECK(cudaMalloc(&staging_, n * sizeof(float)));
      staging_count_ = n;
    }
    TPB_CUDA_CHECK(cudaMemcpyAsync(staging_, host_.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    return staging_;
  }

  WeightSource& source_;
  std::optional<std::uint64_t> seed_;
  cudaStream_t stream_;
  std::vector<float> host_;
  float* staging_ = nullptr;
  std::size_t staging_count_ = 0;
};

}  // namespace

GpuEngine::GpuEngine(const ModelConfig& config, Shard shard, Communicator& comm, WeightSource& weights,
                     GpuEngineOptions options)
    : config_(config), shard_(shard), dims_(shard_dims(config, shard)), comm_(&comm), options_(options) {
  config_.validate();
  TPB_CHECK(comm.size() == shard.tp && comm.rank() == shard.rank,
            "gpu engine shard (rank " << shard.rank << " of " << shard.tp << ") does not match the communicator (rank "
                                      << comm.rank() << " of " << comm.size() << ")");
  TPB_INPUT_CHECK(options_.max_batch > 0 && options_.max_len > 0,
                  "gpu engine: max_batch (" << options_.max_batch << ") and max_len (" << options_.max_len
                                            << ") must be positive");
  check_mem_fraction(options_.mem_fraction);
  if (options_.max_prefill_tokens <= 0) options_.max_prefill_tokens = options_.max_batch * options_.max_len;
  max_tokens_ = std::max(options_.max_batch, options_.max_prefill_tokens);
  // The formula's `total`: free device memory before anything of the engine's, weights included.
  free_before_weights_ = device_free_bytes(&device_total_bytes_);

  const ModelConfig& c = config_;
  const std::int64_t H = c.hidden_size, heads_all = c.num_attention_heads, qk = c.qk_head_dim();
  const std::int64_t lora = c.kv_lora_rank, rope = c.qk_rope_head_dim, width = lora + rope;
  const std::int64_t nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = nope + vd;
  const std::int64_t heads = dims_.heads, E = c.n_routed_experts, L = c.num_hidden_layers;

  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  impl_ = std::make_unique<Impl>();
  Impl& m = *impl_;
  m.linear.set_one_row_gemv(options_.one_row_gemv);

  // Weights, in load_model_weights' order. The loader's staging buffer is freed before the
  // weights are measured and the KV pool sized: it is not part of the model's footprint.
  std::optional<DeviceLoader> loader;
  loader.emplace(weights, stream_);
  DeviceLoader& load = *loader;
  auto bf16_tensor = [&](const WeightRequest& r) {
    bf16* p = m.alloc<bf16>(r.rows() * r.cols());
    load.bf16_block(r, p);
    return p;
  };
  // Fused gate|up of an MLP shard: gate rows [0, inter_local), up rows [inter_local, 2 inter_local).
  auto mlp_into = [&](const std::string& prefix, std::int64_t inter, std::int64_t inter_local, std::int64_t begin,
                      bf16* gate_up, bf16* down) {
    load.bf16_block(rows_req(prefix + ".gate_proj.weight", inter, H, begin, inter_local), gate_up);
    load.bf16_block(rows_req(prefix + ".up_proj.weight", inter, H, begin, inter_local), gate_up + inter_local * H);
    load.bf16_block(cols_req(prefix + ".down_proj.weight", H, inter, begin, inter_local), down);
  };
  const std::size_t before = m.bytes;
  std::size_t routed_weight_bytes = 0;  // every routed expert of every MoE layer
  m.embed = bf16_tensor(rows_req("model.embed_tokens.weight", c.vocab_size, H, dims_.vocab_begin, dims_.vocab,
                                 InitKind::embedding));
  m.layers.resize(L);
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    LayerW& lw = m.layers[l];
    lw.input_norm = bf16_tensor(full_req(p + ".input_layernorm.weight", {H}, InitKind::norm));
    lw.post_norm = bf16_tensor(full_req(p + ".post_attention_layernorm.weight", {H}, InitKind::norm));
    const std::string a = p + ".self_attn";
    if (c.q_lora_rank > 0) {
      lw.q_a = bf16_tensor(full_req(a + ".q_a_proj.weight", {c.q_lora_rank, H}, InitKind::linear));
      lw.q_a_norm = bf16_tensor(full_req(a + ".q_a_layernorm.weight", {c.q_lora_rank}, InitKind::norm));
      lw.q_b = bf16_tensor(rows_req(a + ".q_b_proj.weight", heads_all * qk, c.q_lora_rank, dims_.head_begin * qk, heads * qk));
    } else {
      lw.q_b = bf16_tensor(rows_req(a + ".q_proj.weight", heads_all * qk, H, dims_.head_begin * qk, heads * qk));
    }
    lw.kv_a = bf16_tensor(full_req(a + ".kv_a_proj_with_mqa.weight", {width, H}, InitKind::linear));
    lw.kv_a_norm = bf16_tensor(full_req(a + ".kv_a_layernorm.weight", {lora}, InitKind::norm));
    lw.kv_b = bf16_tensor(rows_req(a + ".kv_b_proj.weight", heads_all * kvr, lora, dims_.head_begin * kvr, heads * kvr));
    lw.o = bf16_tensor(cols_req(a + ".o_proj.weight", H, heads_all * vd, dims_.head_begin * vd, heads * vd));
    lw.moe = c.is_moe_layer(l);
    const std::string mp = p + ".mlp";
    if (!lw.moe) {
      lw.mlp_inter = dims_.intermediate;
      lw.mlp_gate_up = m.alloc<bf16>(2 * lw.mlp_inter * H);
      lw.mlp_down = m.alloc<bf16>(H * lw.mlp_inter);
      mlp_into(mp, c.intermediate_size, lw.mlp_inter, shard.rank * lw.mlp_inter, lw.mlp_gate_up, lw.mlp_down);
      continue;
    }
    lw.router = bf16_tensor(full_req(mp + ".gate.weight", {E, H}, InitKind::linear));
    lw.router_bias = m.alloc<float>(E);
    load.f32_block(full_req(mp + ".gate.e_score_correction_bias", {E}, InitKind::bias), lw.router_bias);
    const std::int64_t I = dims_.moe_intermediate;
    lw.experts_gate_up = m.alloc<bf16>(E * 2 * I * H);
    lw.experts_down = m.alloc<bf16>(E * H * I);
    routed_weight_bytes += static_cast<std::size_t>(E) * routed_expert_bytes();
    for (std::int64_t e = 0; e < E; ++e)
      mlp_into(mp + ".experts." + std::to_string(e), c.moe_intermediate_size, I, shard.rank * I,
               lw.experts_gate_up + e * 2 * I * H, lw.experts_down + e * H * I);
    if (c.n_shared_experts > 0) {
      lw.mlp_inter = dims_.shared_intermediate;
      lw.mlp_gate_up = m.alloc<bf16>(2 * lw.mlp_inter * H);
      lw.mlp_down = m.alloc<bf16>(H * lw.mlp_inter);
      mlp_into(mp + ".shared_experts", c.moe_intermediate_size * c.n_shared_experts, lw.mlp_inter,
               shard.rank * lw.mlp_inter, lw.mlp_gate_up, lw.mlp_down);
    }
  }
  m.final_norm = bf16_tensor(full_req("model.norm.weight", {H}, InitKind::norm));
  m.lm_head = c.tie_word_embeddings
                  ? m.embed
                  : bf16_tensor(rows_req("lm_head.weight", c.vocab_size, H, dims_.vocab_begin, dims_.vocab));
  TPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  loader.reset();
  weight_bytes_ = m.bytes - before;
  // A step gathers rows of the embedding table but reads every other weight except the
  // routed experts it does not choose (a tied table is read whole as the lm_head).
  const std::size_t gathered = c.tie_word_embeddings ? 0 : static_cast<std::size_t>(dims_.vocab * H) * sizeof(bf16);
  step_fixed_weight_bytes_ = weight_bytes_ - routed_weight_bytes - gathered;
  if (options_.on_phase) options_.on_phase("after_weights");

  const kernels::RopeTable table = kernels::make_rope_table(rope_params(c));
  TPB_CHECK(static_cast<std::int64_t>(table.inv_freq.size()) * 2 == rope, "rope table of the wrong width");
  rope_factor_ = table.attention_factor;
  attention_scale_ = static_cast<float>(c.attention_scale());

  inv_freq_host_ = table.inv_freq;
  try {
    allocate_buffers();
  } catch (...) {
    // An infeasible pool is an expected outcome (the caller records it): leave nothing behind.
    impl_.reset();
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
    throw;
  }
}

GpuEngine::~GpuEngine() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (auto& [b, exec] : graphs_) cudaGraphExecDestroy(exec);  // not drop_graphs(): it may throw
  impl_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::size_t GpuEngine::routed_expert_bytes() const {
  if (config_.n_routed_experts == 0) return 0;
  return static_cast<std::size_t>(3 * dims_.moe_intermediate * config_.hidden_size) * sizeof(bf16);  // gate, up, down
}

}  // namespace tpb
