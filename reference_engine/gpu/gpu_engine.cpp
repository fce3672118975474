// The bf16 GPU forward pass (see gpu_engine.h). Buffers are token-major: [tokens, features]
// with token t = b * n + i for sequence b and new-token index i, as in the CPU engine.
#include "reference_engine/gpu/gpu_engine.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>

#include "reference_engine/gpu/kv_cache_write.h"
#include "reference_engine/gpu/synthetic_window.h"
#include "reference_engine/model/rope_params.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/embedding.h"
#include "tpb/kernels/gpu/expert_gemm.h"
#include "tpb/kernels/gpu/linear.h"
#include "tpb/kernels/gpu/mla_decode.h"
#include "tpb/kernels/gpu/mla_prefill.h"
#include "tpb/kernels/gpu/moe_dispatch.h"
#include "tpb/kernels/gpu/moe_router.h"
#include "tpb/kernels/gpu/rmsnorm.h"
#include "tpb/kernels/gpu/rope_yarn.h"
#include "tpb/kernels/gpu/silu_and_mul.h"
#include "tpb/kernels/gpu/synthetic_fill.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/rope_yarn.h"

namespace tpb {
namespace {

using bf16 = __nv_bfloat16;
using synthetic::InitKind;
constexpr std::size_t kBf16 = sizeof(bf16);

void check_mem_fraction(double f) {
  TPB_INPUT_CHECK(f == 0 || (f > 0 && f <= 1),
                  "gpu engine: mem_fraction must be 0 (exact KV cache) or in (0, 1], got " << f);
}

// This rank's device memory (current_device_memory: cudaMemGetInfo alone on a GPU, its share
// of the device in shared placement): free bytes; *total_out gets the total.
std::int64_t device_free_bytes(std::int64_t* total_out) {
  std::size_t free_bytes = 0, total_bytes = 0;
  TPB_CHECK(current_device_memory(&free_bytes, &total_bytes), "gpu engine: cannot read device memory");
  *total_out = static_cast<std::int64_t>(total_bytes);
  return static_cast<std::int64_t>(free_bytes);
}

std::string gib_text(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / static_cast<double>(kGiB));
  return buf;
}

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
};

}  // namespace

struct GpuEngine::Impl {
  std::vector<void*> weight_allocations;  // freed with the engine
  std::vector<void*> buffer_allocations;  // KV cache and activations: freed by resize()
  std::vector<void*>* target = &weight_allocations;
  std::size_t bytes = 0;  // counted by the caller per phase
  gpu::Linear linear;

  // weights
  bf16* embed = nullptr;       // [vocab_local, H]
  bf16* lm_head = nullptr;     // [vocab_local, H]
  bf16* final_norm = nullptr;  // [H]
  std::vector<LayerW> layers;
  float* inv_freq = nullptr;   // [rope / 2]

  // KV cache: [layers][max_batch, max_len, lora + rope]
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
  bf16* kvrow = nullptr;      // [T, lora + rope] normed latent | rotated k_rot (the cache rows)
  bf16* kv = nullptr;         // [T, heads, nope + v] prefill expansion
  bf16* k_nope = nullptr;     // [T, heads, nope]
  bf16* v = nullptr;          // [T, heads, v]
  bf16* k_rot = nullptr;      // [T, rope]
  bf16* qdec = nullptr;       // [max_batch, heads, lora + rope]
  bf16* o_lat = nullptr;      // [max_batch, heads, lora]
  void* decode_ws = nullptr;
  bf16* attn = nullptr;       // [T, heads * v]
  bf16* gate_up = nullptr;    // [T, 2 * max inter_local]
  bf16* act = nullptr;        // [T, max inter_local]
  bf16* shared_out = nullptr; // [T, H]
  float* router_logits = nullptr;  // [T, E]
  std::int32_t* topk_idx = nullptr;  // [T, K]
  float* topk_w = nullptr;           // [T, K]
  std::int32_t* offsets = nullptr;   // [E + 1]
  unsigned long long* expert_reads = nullptr;  // routed experts read by the MoE calls since the buffers were allocated
  std::int32_t* sorted_pairs = nullptr;  // [T * K]
  std::int32_t* position_of = nullptr;   // [T * K]
  bf16* x_sorted = nullptr;   // [T * K, H]
  bf16* gu_sorted = nullptr;  // [T * K, 2 * moe_inter_local]
  bf16* act_sorted = nullptr; // [T * K, moe_inter_local]
  bf16* y_sorted = nullptr;   // [T * K, H]
  float* logits_local = nullptr;  // [T, vocab_local]
  float* gathered = nullptr;      // [tp, T, vocab_local]

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
};

namespace {

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

// The KV cache: exact (max_batch x max_len tokens) or the serving formula's pool, from
// readings taken now. Returns the pool's tokens; throws KvPoolInfeasible.
std::int64_t GpuEngine::size_kv_pool_now() {
  const std::int64_t requested = options_.max_batch * options_.max_len;
  const std::int64_t avail = device_free_bytes(&device_total_bytes_);
  // Constructor: the weights' footprint as measured (everything between the two readings).
  // Later resizes: a server restarted with what is alive now would read total = avail + it.
  if (weights_footprint_bytes_ < 0) weights_footprint_bytes_ = free_before_weights_ - avail;
  const std::int64_t total = avail + weights_footprint_bytes_;
  const std::int64_t cell = kv_cell_bytes(config_, static_cast<std::int64_t>(kBf16));
  if (options_.mem_fraction == 0) {
    kv_pool_ = KvPoolSize{};
    kv_pool_.total_bytes = static_cast<double>(total);
    kv_pool_.avail_bytes = static_cast<double>(avail);
    kv_pool_.cell_bytes = cell;
    kv_pool_.requested_tokens = requested;
    kv_pool_.max_tokens = requested;
    kv_pool_.feasible = true;
    return requested;
  }
  kv_pool_ = size_kv_pool(static_cast<double>(total), static_cast<double>(avail), options_.mem_fraction, cell, requested);
  // Every rank reaches the agreement, feasible or not, before any throws (it is a collective).
  std::int64_t tokens = kv_pool_.max_tokens;  // >= 0: the formula floors a negative rest at 0
  if (options_.agree_kv_tokens) tokens = std::min(tokens, options_.agree_kv_tokens(tokens));
  if (!kv_pool_.feasible) {
    int device = -1;
    cudaGetDevice(&device);
    std::ostringstream os;
    os << "gpu engine: the KV cache of max_batch " << options_.max_batch << " x max_len " << options_.max_len << " = "
       << requested << " tokens (" << cell << " B each) does not fit the pool mem_fraction " << options_.mem_fraction
       << " leaves (" << device_memory_source() << " on device " << device << ": " << gib_text(static_cast<double>(total))
       << " free before the weights, " << gib_text(static_cast<double>(avail)) << " free after them, "
       << gib_text(static_cast<double>(device_total_bytes_)) << " device total). " << kv_pool_.verdict;
    throw KvPoolInfeasible(os.str(), kv_pool_);
  }
  if (tokens < requested) {
    std::ostringstream os;
    os << "gpu engine: the KV cache of max_batch " << options_.max_batch << " x max_len " << options_.max_len << " = "
       << requested << " tokens does not fit the smallest pool of the tensor-parallel group, " << tokens
       << " tokens at mem_fraction " << options_.mem_fraction << " (this rank's own formula gives "
       << kv_pool_.max_tokens << "); a serving engine sizes every rank's KV cache from the smallest.";
    KvPoolSize group = kv_pool_;
    group.max_tokens = tokens;
    group.feasible = false;
    throw KvPoolInfeasible(os.str(), group);
  }
  return tokens;
}

void GpuEngine::allocate_buffers() {
  const ModelConfig& c = config_;
  const std::int64_t H = c.hidden_size, qk = c.qk_head_dim();
  const std::int64_t lora = c.kv_lora_rank, rope = c.qk_rope_head_dim, width = lora + rope;
  const std::int64_t nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = nope + vd;
  const std::int64_t heads = dims_.heads, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const std::int64_t L = c.num_hidden_layers, T = max_tokens_;
  Impl& m = *impl_;
  m.target = &m.buffer_allocations;
  if (options_.on_phase) options_.on_phase("before_buffers");
  const std::size_t before_kv = m.bytes;
  kv_pool_tokens_ = 0;
  const std::int64_t pool_tokens = size_kv_pool_now();
  // Layer l's [max_batch, max_len, width] cache starts at l * max_batch * max_len rows of the
  // pool, whatever its size: the layout of the exact cache. Tokens past L x max_batch x
  // max_len rows are held, unused, as a server holds the pages no request has taken yet.
  m.cache = m.alloc<bf16>(pool_tokens * L * width);
  kv_pool_tokens_ = pool_tokens;
  kv_bytes_ = m.bytes - before_kv;
  if (options_.on_phase) options_.on_phase("after_kv");

  // The step buffers. reference_engine/memory/engine_buffers.cpp plans them buffer by buffer
  // (the planner runs without CUDA): a buffer added here goes there too, or plan_matches_measured
  // reports the term `activations`.
  const std::size_t before_act = m.bytes;
  m.inv_freq = m.alloc<float>(rope / 2);
  TPB_CUDA_CHECK(cudaMemcpy(m.inv_freq, inv_freq_host_.data(), sizeof(float) * inv_freq_host_.size(),
                            cudaMemcpyHostToDevice));
  m.ids = m.alloc<std::int32_t>(T);
  m.positions = m.alloc<std::int32_t>(T);
  m.seq_lens = m.alloc<std::int32_t>(options_.max_batch);
  m.residual = m.alloc<float>(T * H);
  m.delta = m.alloc<bf16>(T * H);
  m.xn = m.alloc<bf16>(T * H);
  if (c.q_lora_rank > 0) {
    m.qa = m.alloc<bf16>(T * c.q_lora_rank);
    m.qa_n = m.alloc<bf16>(T * c.q_lora_rank);
  }
  m.q = m.alloc<bf16>(T * heads * qk);
  m.ckv = m.alloc<bf16>(T * width);
  m.kvrow = m.alloc<bf16>(T * width);
  const std::int64_t Tp = options_.max_prefill_tokens;
  m.kv = m.alloc<bf16>(Tp * heads * kvr);
  m.k_nope = m.alloc<bf16>(Tp * heads * nope);
  m.v = m.alloc<bf16>(Tp * heads * vd);
  m.k_rot = m.alloc<bf16>(Tp * rope);
  m.qdec = m.alloc<bf16>(options_.max_batch * heads * width);
  m.o_lat = m.alloc<bf16>(options_.max_batch * heads * lora);
  // The split count depends on the batch (fewer sequences, more splits), so the workspace is
  // the largest any batch size up to max_batch asks for.
  std::size_t ws_bytes = 0;
  for (std::int64_t b = 1; b <= options_.max_batch; ++b)
    ws_bytes = std::max(ws_bytes, gpu::mla_decode_workspace_bytes({b, heads, lora, rope, options_.max_len}));
  m.decode_ws = m.alloc<unsigned char>(static_cast<std::int64_t>(ws_bytes));
  m.attn = m.alloc<bf16>(T * heads * vd);
  const std::int64_t inter_max = std::max(dims_.intermediate, dims_.shared_intermediate);
  m.gate_up = m.alloc<bf16>(T * 2 * inter_max);
  m.act = m.alloc<bf16>(T * inter_max);
  if (E > 0) {
    const std::int64_t I = dims_.moe_intermediate;
    m.shared_out = m.alloc<bf16>(T * H);
    m.router_logits = m.alloc<float>(T * E);
    m.topk_idx = m.alloc<std::int32_t>(T * K);
    m.topk_w = m.alloc<float>(T * K);
    m.offsets = m.alloc<std::int32_t>(E + 1);
    m.expert_reads = m.alloc<unsigned long long>(1);
    TPB_CUDA_CHECK(cudaMemset(m.expert_reads, 0, sizeof(unsigned long long)));
    m.sorted_pairs = m.alloc<std::int32_t>(T * K);
    m.position_of = m.alloc<std::int32_t>(T * K);
    m.x_sorted = m.alloc<bf16>(T * K * H);
    m.gu_sorted = m.alloc<bf16>(T * K * 2 * I);
    m.act_sorted = m.alloc<bf16>(T * K * I);
    m.y_sorted = m.alloc<bf16>(T * K * H);
  }
  const std::int64_t logits_rows = options_.last_position_logits ? options_.max_batch : T;
  m.logits_local = m.alloc<float>(logits_rows * dims_.vocab);
  m.gathered = m.alloc<float>(static_cast<std::int64_t>(shard_.tp) * logits_rows * dims_.vocab);
  buffers_last_position_ = options_.last_position_logits;
  activation_bytes_ = m.bytes - before_act + m.linear.workspace_bytes();
  m.target = &m.weight_allocations;
  if (options_.on_phase) options_.on_phase("after_buffers");
}

GpuEngine::~GpuEngine() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (auto& [b, exec] : graphs_) cudaGraphExecDestroy(exec);  // not drop_graphs(): it may throw
  impl_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::vector<std::size_t> GpuEngine::step_all_reduce_counts(std::int64_t tokens) const {
  return std::vector<std::size_t>(static_cast<std::size_t>(2 * config_.num_hidden_layers + 1),
                                  static_cast<std::size_t>(tokens * config_.hidden_size));
}

void GpuEngine::check_tokens(const std::vector<std::int64_t>& tokens) const {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    TPB_INPUT_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size,
                    "token " << tokens[i] << " at index " << i << " is outside the vocabulary [0, "
                             << config_.vocab_size << ")");
}

// Token ids, positions (past + i) and sequence lengths (past + n) into their fixed device
// buffers, queued on the stream ahead of the step. Pageable host memory: cudaMemcpyAsync
// has read it when it returns, so the host vectors may go out of scope.
void GpuEngine::upload_step_inputs(const std::vector<std::int64_t>& tokens, std::int64_t n) {
  const std::int64_t T = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int32_t> ids(T), pos(T), lens(batch_, static_cast<std::int32_t>(length_ + n));
  for (std::int64_t t = 0; t < T; ++t) {
    ids[t] = static_cast<std::int32_t>(tokens[t]);
    pos[t] = static_cast<std::int32_t>(length_ + t % n);
  }
  Impl& m = *impl_;
  TPB_CUDA_CHECK(cudaMemcpyAsync(m.ids, ids.data(), sizeof(std::int32_t) * T, cudaMemcpyHostToDevice, stream_));
  TPB_CUDA_CHECK(cudaMemcpyAsync(m.positions, pos.data(), sizeof(std::int32_t) * T, cudaMemcpyHostToDevice, stream_));
  TPB_CUDA_CHECK(
      cudaMemcpyAsync(m.seq_lens, lens.data(), sizeof(std::int32_t) * batch_, cudaMemcpyHostToDevice, stream_));
}

void GpuEngine::prefill(const std::vector<std::int64_t>& tokens, std::int64_t batch) {
  TPB_INPUT_CHECK(batch > 0 && !tokens.empty() && tokens.size() % batch == 0,
                  "prefill: " << tokens.size() << " tokens do not split into " << batch << " equal sequences");
  const std::int64_t n = static_cast<std::int64_t>(tokens.size()) / batch;
  TPB_INPUT_CHECK(batch <= options_.max_batch, "prefill: batch " << batch << " above max_batch " << options_.max_batch);
  TPB_INPUT_CHECK(n <= options_.max_len, "prefill: " << n << " tokens per sequence above max_len " << options_.max_len);
  TPB_INPUT_CHECK(batch * n <= options_.max_prefill_tokens,
                  "prefill: " << batch * n << " tokens above max_prefill_tokens " << options_.max_prefill_tokens);
  check_tokens(tokens);
  batch_ = batch;
  length_ = 0;
  upload_step_inputs(tokens, n);
  forward(n, false);
  length_ = n;
}

void GpuEngine::decode(const std::vector<std::int64_t>& tokens) {
  TPB_INPUT_CHECK(batch_ > 0, "decode before prefill");
  TPB_INPUT_CHECK(static_cast<std::int64_t>(tokens.size()) == batch_,
                  "decode: " << tokens.size() << " tokens for " << batch_ << " sequences");
  TPB_INPUT_CHECK(length_ + 1 <= options_.max_len,
                  "decode: the KV cache holds " << options_.max_len << " tokens per sequence, all used");
  check_tokens(tokens);
  upload_step_inputs(tokens, 1);
  if (!options_.cuda_graph) {
    forward(1, true);
  } else if (auto it = graphs_.find(batch_); it != graphs_.end()) {
    TPB_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    const std::int64_t L = config_.num_hidden_layers;
    stats_.all_reduces += 2 * L + 1;
    stats_.all_reduce_bytes += (2 * L + 1) * batch_ * config_.hidden_size * static_cast<std::int64_t>(kBf16);
    stats_.all_gathers += 1;
    stats_.tokens += batch_;
    ++stats_.graph_replays;
    last_tokens_ = batch_;    // a replay is a step: its logits replace the last ones
    logits_valid_ = false;
  } else if (decode_runs_[batch_] == 0) {
    // First step of this shape: eager, so cuBLASLt (and any lazily set-up kernel) has chosen
    // and cached what the capture will record.
    forward(1, true);
    ++decode_runs_[batch_];
  } else {
    cudaGraph_t graph = nullptr;
    TPB_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      forward(1, true);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    TPB_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TPB_CUDA_CHECK(inst);
    graphs_[batch_] = exec;
    ++stats_.graph_captures;
    // The capture recorded the step without running it (forward() counted its collectives).
    TPB_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    ++stats_.graph_replays;
    last_tokens_ = batch_;
    logits_valid_ = false;
  }
  length_ += 1;
}

void GpuEngine::drop_graphs() {
  if (!graphs_.empty()) synchronize();
  for (auto& [b, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  decode_runs_.clear();
}

void GpuEngine::resize(std::int64_t max_batch, std::int64_t max_len, std::int64_t max_prefill_tokens) {
  TPB_INPUT_CHECK(max_batch > 0 && max_len > 0 && max_prefill_tokens > 0,
                  "gpu engine resize: sizes must be positive (" << max_batch << ", " << max_len << ", "
                                                               << max_prefill_tokens << ")");
  // A pool is re-derived every time: the free memory may have changed (another backend's
  // buffers), as it would for a server started now.
  if (max_batch == options_.max_batch && max_len == options_.max_len &&
      max_prefill_tokens == options_.max_prefill_tokens && options_.last_position_logits == buffers_last_position_ &&
      options_.mem_fraction == 0 && kv_pool_.mem_fraction == 0)
    return;
  drop_graphs();
  synchronize();
  options_.max_batch = max_batch;
  options_.max_len = max_len;
  options_.max_prefill_tokens = max_prefill_tokens;
  max_tokens_ = std::max(options_.max_batch, options_.max_prefill_tokens);
  impl_->free_buffers();
  try {
    allocate_buffers();
  } catch (...) {
    // Out of memory half way: free what was allocated and leave sizes no later resize can
    // match, so the next resize reallocates instead of keeping dangling buffers.
    impl_->free_buffers();
    options_.max_batch = options_.max_len = options_.max_prefill_tokens = 0;
    batch_ = length_ = last_tokens_ = 0;
    logits_valid_ = false;
    throw;
  }
  batch_ = length_ = last_tokens_ = 0;
  logits_valid_ = false;
}

void GpuEngine::set_mem_fraction(double mem_fraction) {
  check_mem_fraction(mem_fraction);
  options_.mem_fraction = mem_fraction;
}

void GpuEngine::set_communicator(Communicator& comm) {
  TPB_CHECK(comm.size() == shard_.tp && comm.rank() == shard_.rank,
            "gpu engine: communicator rank " << comm.rank() << " of " << comm.size() << " for shard rank "
                                             << shard_.rank << " of " << shard_.tp);
  if (&comm == comm_) return;
  drop_graphs();
  comm_ = &comm;
}

void GpuEngine::forget_communicator() {
  drop_graphs();
  comm_ = nullptr;
}

void GpuEngine::fill_kv_synthetic(std::int64_t batch, std::int64_t tokens, std::uint64_t seed) {
  TPB_INPUT_CHECK(batch >= 1 && batch <= options_.max_batch && tokens >= 0 && tokens <= options_.max_len &&
                      tokens <= (std::int64_t{1} << 24),
                  "fill_kv_synthetic: batch " << batch << " x " << tokens << " tokens outside the cache ("
                                              << options_.max_batch << " x " << options_.max_len << ")");
  const std::int64_t width = config_.kv_cache_width();
  for (std::int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    // Layer l is one global [batch * 2^24, width] tensor (2^24 rows per sequence, whatever
    // max_len this engine was sized for, so the values do not depend on the sizing history);
    // sequence b's first `tokens` rows are one window of it.
    const std::string name = "kv_cache.synthetic.layer" + std::to_string(l);
    for (std::int64_t b = 0; b < batch && tokens > 0; ++b) {
      gpu::SyntheticWindow w;
      w.key = synthetic::tensor_key(seed, synthetic::name_hash(name.c_str()));
      w.kind = InitKind::embedding;
      w.global_cols = width;
      w.row_begin = b << 24;
      w.rows = tokens;
      w.col_begin = 0;
      w.cols = width;
      bf16* dst = impl_->cache + (l * options_.max_batch + b) * options_.max_len * width;
      gpu::synthetic_fill_bf16(w, dst, width, stream_);
    }
  }
  batch_ = batch;
  length_ = tokens;
  last_tokens_ = 0;
  logits_valid_ = false;
}

void GpuEngine::rewind(std::int64_t tokens) {
  TPB_INPUT_CHECK(tokens >= 0 && tokens <= length_,
                  "rewind to " << tokens << " tokens, but " << length_ << " are cached");
  length_ = tokens;
}

void GpuEngine::synchronize() const { TPB_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::size_t GpuEngine::routed_expert_bytes() const {
  if (config_.n_routed_experts == 0) return 0;
  return static_cast<std::size_t>(3 * dims_.moe_intermediate * config_.hidden_size) * sizeof(bf16);  // gate, up, down
}

std::int64_t GpuEngine::routed_expert_reads() const {
  if (impl_->expert_reads == nullptr) return 0;  // no MoE layer
  unsigned long long reads = 0;
  TPB_CUDA_CHECK(cudaMemcpyAsync(&reads, impl_->expert_reads, sizeof(reads), cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return static_cast<std::int64_t>(reads);
}

const std::vector<float>& GpuEngine::logits() const {
  if (logits_valid_) return logits_;
  const std::int64_t T = last_tokens_, vl = dims_.vocab, V = config_.vocab_size;
  std::vector<float> gathered(static_cast<std::size_t>(shard_.tp * T * vl));
  TPB_CUDA_CHECK(cudaMemcpyAsync(gathered.data(), impl_->gathered, sizeof(float) * gathered.size(),
                                 cudaMemcpyDeviceToHost, stream_));
  synchronize();
  // gathered is [rank][token][vocab_local]; logits are [token][rank * vocab_local + v].
  logits_.resize(static_cast<std::size_t>(T * V));
  for (int r = 0; r < shard_.tp; ++r)
    for (std::int64_t t = 0; t < T; ++t)
      std::memcpy(logits_.data() + t * V + r * vl, gathered.data() + (r * T + t) * vl, sizeof(float) * vl);
  logits_valid_ = true;
  return logits_;
}

std::vector<float> GpuEngine::last_position_logits() const {
  TPB_CHECK(batch_ > 0 && last_tokens_ > 0 && last_tokens_ % batch_ == 0, "last_position_logits: no step has run");
  const std::int64_t n = last_tokens_ / batch_, vl = dims_.vocab, V = config_.vocab_size;
  std::vector<float> out(static_cast<std::size_t>(batch_ * V));
  for (int r = 0; r < shard_.tp; ++r)
    for (std::int64_t b = 0; b < batch_; ++b)
      TPB_CUDA_CHECK(cudaMemcpyAsync(out.data() + b * V + r * vl,
                                     impl_->gathered + (r * last_tokens_ + b * n + n - 1) * vl, sizeof(float) * vl,
                                     cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return out;
}

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

  gpu::embedding_gather(m.ids, T, m.embed, dims_.vocab_begin, dims_.vocab_begin + dims_.vocab, H, m.delta, stream_);
  all_reduce_bf16(m.delta, T);
  gpu::residual_from_bf16(m.delta, m.residual, T * H, stream_);
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
  stats_.tokens += T;
  last_tokens_ = rows;
  logits_valid_ = false;
}

namespace {

// q, the cache rows (normed latent | rotated k_rot) and the cache write: the part of MLA both
// forms share. T = tokens of the step.
void mla_project(GpuEngine::Impl& m, const LayerW& lw, const ModelConfig& c, std::int64_t heads, std::int64_t T,
                 std::int64_t n, bf16* cache_layer, std::int64_t max_len, float rope_factor, cudaStream_t s) {
  const std::int64_t H = c.hidden_size, qk = c.qk_head_dim(), lora = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  const std::int64_t width = lora + rope, ql = c.q_lora_rank;
  const float eps = static_cast<float>(c.rms_norm_eps);
  if (ql > 0) {
    m.linear.bf16_out(m.xn, H, lw.q_a, m.qa, ql, T, H, ql, s);
    gpu::rmsnorm(m.qa, ql, lw.q_a_norm, m.qa_n, ql, T, ql, eps, s);
    m.linear.bf16_out(m.qa_n, ql, lw.q_b, m.q, heads * qk, T, ql, heads * qk, s);
  } else {
    m.linear.bf16_out(m.xn, H, lw.q_b, m.q, heads * qk, T, H, heads * qk, s);
  }
  m.linear.bf16_out(m.xn, H, lw.kv_a, m.ckv, width, T, H, width, s);
  gpu::rmsnorm(m.ckv, width, lw.kv_a_norm, m.kvrow, width, T, lora, eps, s);
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.kvrow + lora, width * kBf16, m.ckv + lora, width * kBf16, rope * kBf16, T,
                                   cudaMemcpyDeviceToDevice, s));
  gpu::rope_interleaved(m.kvrow + lora, T, width, 1, m.positions, m.inv_freq, rope / 2, rope_factor, s);
  gpu::rope_interleaved(m.q + c.qk_nope_head_dim, T * heads, qk, heads, m.positions, m.inv_freq, rope / 2,
                        rope_factor, s);
  gpu::kv_cache_write(m.kvrow, T, n, m.positions, cache_layer, max_len, width, s);
}

}  // namespace

void GpuEngine::attention_prefill(std::int64_t layer, std::int64_t n) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const LayerW& lw = m.layers[layer];
  const std::int64_t H = c.hidden_size, heads = dims_.heads, T = batch_ * n;
  const std::int64_t lora = c.kv_lora_rank, rope = c.qk_rope_head_dim, width = lora + rope;
  const std::int64_t nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = nope + vd;
  TPB_CHECK(length_ == 0, "gpu prefill starts new sequences (chunked prefill is not implemented)");
  bf16* cache_layer = m.cache + layer * options_.max_batch * options_.max_len * width;
  mla_project(m, lw, c, heads, T, n, cache_layer, options_.max_len, rope_factor_, stream_);

  // Plain form, as HF: expand the new latents through kv_b_proj into k_nope | v per head.
  m.linear.bf16_out(m.kvrow, width, lw.kv_b, m.kv, heads * kvr, T, lora, heads * kvr, stream_);
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.k_nope, nope * kBf16, m.kv, kvr * kBf16, nope * kBf16, T * heads,
                                   cudaMemcpyDeviceToDevice, stream_));
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.v, vd * kBf16, m.kv + nope, kvr * kBf16, vd * kBf16, T * heads,
                                   cudaMemcpyDeviceToDevice, stream_));
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.k_rot, rope * kBf16, m.kvrow + lora, width * kBf16, rope * kBf16, T,
                                   cudaMemcpyDeviceToDevice, stream_));
  const gpu::MlaPrefillShape shape{batch_, n, 0, heads, nope, rope, vd};
  gpu::mla_prefill_attention(m.q, m.k_nope, m.k_rot, m.v, shape, attention_scale_, m.attn, stream_);
  m.linear.bf16_out(m.attn, heads * vd, lw.o, m.delta, H, T, heads * vd, H, stream_);
}

void GpuEngine::attention_decode(std::int64_t layer) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const LayerW& lw = m.layers[layer];
  const std::int64_t H = c.hidden_size, heads = dims_.heads, B = batch_, qk = c.qk_head_dim();
  const std::int64_t lora = c.kv_lora_rank, rope = c.qk_rope_head_dim, width = lora + rope;
  const std::int64_t nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = nope + vd;
  bf16* cache_layer = m.cache + layer * options_.max_batch * options_.max_len * width;
  mla_project(m, lw, c, heads, B, 1, cache_layer, options_.max_len, rope_factor_, stream_);

  // Absorbed form: q_lat[b, h] = q_nope[b, h] · W_UK_h, W_UK_h = kv_b rows [h*kvr, h*kvr + nope)
  // stored [nope (in), lora (out)]: w_trans.
  m.linear.bf16_out_batched(m.q, heads * qk, qk, lw.kv_b, true, lora, kvr * lora, m.qdec, heads * width, width, heads,
                            B, nope, lora, stream_);
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(m.qdec + lora, width * kBf16, m.q + nope, qk * kBf16, rope * kBf16, B * heads,
                                   cudaMemcpyDeviceToDevice, stream_));
  const gpu::MlaDecodeShape shape{B, heads, lora, rope, options_.max_len};
  gpu::mla_decode_attention(m.qdec, cache_layer, m.seq_lens, shape, attention_scale_, m.decode_ws, m.o_lat, stream_);
  // o[b, h] = o_lat[b, h] · W_UV_h^T, W_UV_h = kv_b rows [h*kvr + nope, (h+1)*kvr) stored [v (out), lora (in)].
  m.linear.bf16_out_batched(m.o_lat, heads * lora, lora, lw.kv_b + nope * lora, false, lora, kvr * lora, m.attn,
                            heads * vd, vd, heads, B, lora, vd, stream_);
  m.linear.bf16_out(m.attn, heads * vd, lw.o, m.delta, H, B, heads * vd, H, stream_);
}

void GpuEngine::ffn(std::int64_t layer, std::int64_t T, bool grouped) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const LayerW& lw = m.layers[layer];
  const std::int64_t H = c.hidden_size;
  // Dense MLP, or the shared experts: down(silu(gate) * up) over the fused gate|up GEMM.
  auto mlp = [&](bf16* out) {
    const std::int64_t I = lw.mlp_inter;
    m.linear.bf16_out(m.xn, H, lw.mlp_gate_up, m.gate_up, 2 * I, T, H, 2 * I, stream_);
    gpu::silu_and_mul(m.gate_up, m.act, T, I, stream_);
    m.linear.bf16_out(m.act, I, lw.mlp_down, out, H, T, I, H, stream_);
  };
  if (!lw.moe) {
    mlp(m.delta);
    return;
  }
  const std::int64_t E = c.n_routed_experts, K = c.num_experts_per_tok, I = dims_.moe_intermediate, P = T * K;
  m.linear.f32_out(m.xn, H, lw.router, m.router_logits, E, T, H, E, stream_);
  const kernels::RouterParams rp{E, K, c.n_group, c.topk_group, c.norm_topk_prob,
                                 static_cast<float>(c.routed_scaling_factor)};
  gpu::moe_route_noaux_tc(m.router_logits, lw.router_bias, T, rp, m.topk_idx, m.topk_w, stream_);
  if (options_.count_expert_hits) {
    // Diagnostics only (tests comparing routing with the CPU engine): a synchronous copy, so
    // never inside a captured step.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    TPB_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
    TPB_CHECK(capturing == cudaStreamCaptureStatusNone, "count_expert_hits cannot run inside a CUDA graph");
    std::vector<std::int32_t> idx(static_cast<std::size_t>(T * K));
    TPB_CUDA_CHECK(cudaMemcpyAsync(idx.data(), m.topk_idx, sizeof(std::int32_t) * idx.size(), cudaMemcpyDeviceToHost, stream_));
    synchronize();
    if (stats_.expert_hits.empty()) stats_.expert_hits.assign(static_cast<std::size_t>(E), 0);
    for (std::int32_t e : idx) ++stats_.expert_hits[static_cast<std::size_t>(e)];
    stats_.routing.insert(stats_.routing.end(), idx.begin(), idx.end());
  }
  gpu::moe_dispatch_plan(m.topk_idx, T, K, E, m.offsets, m.sorted_pairs, m.position_of, stream_, m.expert_reads);
  gpu::moe_gather(m.xn, m.sorted_pairs, P, K, H, m.x_sorted, stream_);
  if (grouped) {
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
  const bool shared = c.n_shared_experts > 0;
  if (shared) mlp(m.shared_out);
  gpu::moe_combine(m.y_sorted, m.position_of, m.topk_w, shared ? m.shared_out : nullptr, T, K, H, m.delta, stream_);
}

}  // namespace tpb
