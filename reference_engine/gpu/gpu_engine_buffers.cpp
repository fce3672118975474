// GpuEngine, memory: the KV pool (exact, or the serving formula's, see gpu_engine.h) and the
// step buffers, allocated at construction and by resize(); the synthetic KV fill.
#include "reference_engine/gpu/gpu_engine_impl.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include "reference_engine/gpu/synthetic_window.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/gpu/mla_decode.h"
#include "tpb/kernels/gpu/synthetic_fill.h"

namespace tpb {
namespace gpu_engine_internal {

void check_mem_fraction(double f) {
  TPB_INPUT_CHECK(f == 0 || (f > 0 && f <= 1),
                  "gpu engine: mem_fraction must be 0 (exact KV cache) or in (0, 1], got " << f);
}

std::int64_t device_free_bytes(std::int64_t* total_out) {
  std::size_t free_bytes = 0, total_bytes = 0;
  TPB_CHECK(current_device_memory(&free_bytes, &total_bytes), "gpu engine: cannot read device memory");
  *total_out = static_cast<std::int64_t>(total_bytes);
  return static_cast<std::int64_t>(free_bytes);
}

}  // namespace gpu_engine_internal

using gpu_engine_internal::bf16;
using gpu_engine_internal::kBf16;
using gpu_engine_internal::check_mem_fraction;
using gpu_engine_internal::device_free_bytes;
using synthetic::InitKind;

namespace {

std::string gib_text(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / static_cast<double>(kGiB));
  return buf;
}

}  // namespace

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
  Impl& m = *impl_;
  const AttentionWidths& a = m.widths;
  const bool cache_padded = a.cache_row() != width;
  const std::int64_t heads = dims_.heads, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const std::int64_t L = c.num_hidden_layers, T = max_tokens_;
  m.target = &m.buffer_allocations;
  if (options_.on_phase) options_.on_phase("before_buffers");
  const std::size_t before_kv = m.bytes;
  kv_pool_tokens_ = 0;
  const std::int64_t pool_tokens = size_kv_pool_now();
  // Layer l's [max_batch, max_len, width] cache starts at l * max_batch * max_len rows of the
  // pool, whatever its size: the layout of the exact cache. Tokens past L x max_batch x
  // max_len rows are held, unused, as a server holds the pages no request has taken yet.
  // Padded rows: zeros in the pads of rows no step has written yet (fill_kv_synthetic writes
  // the model's columns only).
  m.cache = m.alloc_padded<bf16>(pool_tokens * L * a.cache_row(), cache_padded);
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
  m.kvrow = m.alloc_padded<bf16>(T * a.cache_row(), cache_padded);
  const std::int64_t Tp = options_.max_prefill_tokens;
  m.kv = m.alloc<bf16>(Tp * heads * kvr);
  m.k_nope = m.alloc_padded<bf16>(Tp * heads * a.nope, a.nope != nope);
  m.v = m.alloc_padded<bf16>(Tp * heads * a.v, a.v != vd);
  m.k_rot = m.alloc<bf16>(Tp * rope);
  m.q_prefill = a.nope != nope ? m.alloc_padded<bf16>(Tp * heads * (a.nope + rope), true) : nullptr;
  m.attn_prefill = a.v != vd ? m.alloc<bf16>(Tp * heads * a.v) : nullptr;
  m.qdec = m.alloc_padded<bf16>(options_.max_batch * heads * a.cache_row(), cache_padded);
  m.o_lat = m.alloc<bf16>(options_.max_batch * heads * a.lora);
  // The split count depends on the batch (fewer sequences, more splits), so the workspace is
  // the largest any batch size up to max_batch asks for.
  std::size_t ws_bytes = 0;
  for (std::int64_t b = 1; b <= options_.max_batch; ++b)
    ws_bytes = std::max(ws_bytes, gpu::mla_decode_workspace_bytes({b, heads, a.lora, a.rope, options_.max_len}));
  m.decode_ws = m.alloc<unsigned char>(static_cast<std::int64_t>(ws_bytes));
  m.decode_ws_bytes = ws_bytes;
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
    m.expert_reads = m.alloc<unsigned long long>(c.num_hidden_layers);
    TPB_CUDA_CHECK(cudaMemset(m.expert_reads, 0, sizeof(unsigned long long) * c.num_hidden_layers));
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
  activation_bytes_ = m.bytes - before_act + m.linear.workspace_bytes() + m.side.linear.workspace_bytes();
  m.target = &m.weight_allocations;
  if (options_.on_phase) options_.on_phase("after_buffers");
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

void GpuEngine::fill_kv_synthetic(std::int64_t batch, std::int64_t tokens, std::uint64_t seed) {
  TPB_INPUT_CHECK(batch >= 1 && batch <= options_.max_batch && tokens >= 0 && tokens <= options_.max_len &&
                      tokens <= (std::int64_t{1} << 24),
                  "fill_kv_synthetic: batch " << batch << " x " << tokens << " tokens outside the cache ("
                                              << options_.max_batch << " x " << options_.max_len << ")");
  const std::int64_t width = config_.kv_cache_width(), lora = config_.kv_lora_rank;
  const AttentionWidths& a = impl_->widths;
  const bool padded = a.cache_row() != width;
  for (std::int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    // Layer l is one global [batch * 2^24, width] tensor (2^24 rows per sequence, whatever
    // max_len this engine was sized for, so the values do not depend on the sizing history);
    // sequence b's first `tokens` rows are one window of it. Its latent and rotary columns
    // land in the cache row's two parts (apart by the padding, if any; the pads stay zero).
    const std::string name = "kv_cache.synthetic.layer" + std::to_string(l);
    for (std::int64_t b = 0; b < batch && tokens > 0; ++b) {
      gpu::SyntheticWindow w;
      w.key = synthetic::tensor_key(seed, synthetic::name_hash(name.c_str()));
      w.kind = InitKind::embedding;
      w.global_cols = width;
      w.row_begin = b << 24;
      w.rows = tokens;
      bf16* dst = impl_->cache + (l * options_.max_batch + b) * options_.max_len * a.cache_row();
      w.col_begin = 0;
      w.cols = padded ? lora : width;
      gpu::synthetic_fill_bf16(w, dst, a.cache_row(), stream_);
      if (padded && width > lora) {
        w.col_begin = lora;
        w.cols = width - lora;
        gpu::synthetic_fill_bf16(w, dst + a.lora, a.cache_row(), stream_);
      }
    }
  }
  batch_ = batch;
  length_ = tokens;
  last_tokens_ = 0;
  logits_valid_ = false;
}

}  // namespace tpb
