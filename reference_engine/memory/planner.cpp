// The memory planner: the serving engines' KV sizing formula applied to predicted terms.
// The formula, the activation model and the graph-pool model are documented in planner.h.
#include "reference_engine/memory/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reference_engine/memory/attention_widths.h"
#include "tpb/check.h"

namespace tpb {

namespace {

constexpr std::int64_t kBf16 = 2;

std::string gib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / static_cast<double>(kGiB));
  return buf;
}

// The breakdown's note for NCCL's socket-transport buffers: measured at TP 2 and 4 only.
std::string nccl_socket_note(int tp) {
  return std::string(tp == 2 || tp == 4 ? "MEASURED" : "ESTIMATE") +
         " socket transport (ranks share a GPU): 368 MiB + 14 MiB x " + std::to_string(tp) +
         " ranks, fit to H200 TP 2 and 4";
}

// Fractions are shown rounded UP to 4 decimals, so a value copied from the sentence works.
std::string fraction_up(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", std::ceil(f * 1e4 - 1e-9) / 1e4);
  return buf;
}

// The largest fraction shown rounded DOWN, for the same reason.
std::string fraction_down(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", std::floor(f * 1e4 + 1e-9) / 1e4);
  return buf;
}

}  // namespace

ActivationPeak activation_peak(const ModelConfig& c, int tp, std::int64_t batch, std::int64_t seq_len) {
  TPB_INPUT_CHECK(batch >= 1, "activation batch: expected >= 1 sequences, got " << batch);
  TPB_INPUT_CHECK(seq_len >= 1, "activation seq_len: expected >= 1 tokens, got " << seq_len);
  c.validate_tp(tp);
  ActivationPeak a;
  const std::int64_t T = batch * seq_len, H = c.hidden_size, heads = c.num_attention_heads / tp;
  a.tokens = T;
  a.residual_bytes = 2 * T * H * kBf16;
  {
    const std::int64_t q_in = c.q_lora_rank > 0 ? 2 * c.q_lora_rank : 0;
    const std::int64_t per_token = q_in + heads * c.qk_head_dim()     // q
                                   + heads * c.qk_head_dim()          // k (nope | broadcast rope)
                                   + c.kv_cache_width() + c.kv_lora_rank  // kv_a out, normed latent
                                   + heads * (c.qk_nope_head_dim + c.v_head_dim)  // kv_b out
                                   + heads * c.v_head_dim             // attention out
                                   + H;                               // o_proj out
    a.attention_bytes = T * per_token * kBf16;
  }
  bool has_moe = false, has_dense = false;
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) (c.is_moe_layer(l) ? has_moe : has_dense) = true;
  if (has_moe) {
    const std::int64_t I = c.moe_intermediate_size / tp, k = c.num_experts_per_tok;
    a.moe_bytes = T * c.n_routed_experts * 4                      // router scores, fp32
                  + T * k * 8                                     // top-k ids (int32) + weights (fp32)
                  + T * k * (2 * I + I + H) * kBf16               // fused-MoE caches 1, 2, 3
                  + (c.n_shared_experts > 0 ? T * (c.n_shared_experts * 3 * I + H) * kBf16 : 0)  // shared
                  + T * H * kBf16;                                // combined output
  }
  if (has_dense) {
    const std::int64_t I = c.intermediate_size / tp;
    a.dense_mlp_bytes = T * (2 * I + I + H) * kBf16;
  }
  a.logits_bytes = batch * c.vocab_size * 4 + batch * (c.vocab_size / tp) * kBf16;
  const std::pair<std::int64_t, const char*> parts[] = {{a.attention_bytes, "attention"},
                                                        {a.moe_bytes, "moe"},
                                                        {a.dense_mlp_bytes, "dense_mlp"},
                                                        {a.logits_bytes, "logits"}};
  std::int64_t largest = -1;
  for (const auto& [bytes, name] : parts) {
    if (bytes > largest) {
      largest = bytes;
      a.largest = name;
    }
  }
  a.peak_bytes = a.residual_bytes + largest;
  return a;
}

std::int64_t kv_cell_bytes(const ModelConfig& config, std::int64_t kv_dtype_bytes) {
  TPB_INPUT_CHECK(kv_dtype_bytes == 1 || kv_dtype_bytes == 2,
                  "kv cache dtype: expected 1 (fp8) or 2 (bf16) bytes per element, got " << kv_dtype_bytes);
  // The GPU engine's row (attention_widths.h): kv_cache_width() for every published model.
  return attention_widths(config).cache_row() * config.num_hidden_layers * kv_dtype_bytes;
}

double kv_rest_bytes(double total_bytes, double avail_bytes, double mem_fraction) {
  return avail_bytes - total_bytes * (1.0 - mem_fraction);
}

std::int64_t kv_max_tokens(double total_bytes, double avail_bytes, double mem_fraction, std::int64_t cell_bytes) {
  TPB_CHECK(cell_bytes > 0, "kv cell must be positive, got " << cell_bytes);
  const double rest = kv_rest_bytes(total_bytes, avail_bytes, mem_fraction);
  if (rest <= 0) return 0;
  return static_cast<std::int64_t>(std::floor(rest / static_cast<double>(cell_bytes)));
}

double kv_min_mem_fraction(double total_bytes, double avail_bytes, std::int64_t cell_bytes, std::int64_t tokens) {
  TPB_CHECK(tokens >= 1, "tokens must be >= 1, got " << tokens);
  TPB_CHECK(total_bytes > 0, "total must be positive, got " << total_bytes);
  const double need = static_cast<double>(tokens) * static_cast<double>(cell_bytes);
  double f = 1.0 - (avail_bytes - need) / total_bytes;
  if (f > 1.0) return f;  // even the whole of `avail` is too small
  // The solved value can sit an ulp below the boundary after rounding; step up until the
  // floor agrees, so a plan at the returned fraction is feasible and any smaller one is not.
  for (int i = 0; i < 1000 && kv_max_tokens(total_bytes, avail_bytes, f, cell_bytes) < tokens; ++i)
    f = std::nextafter(f, 2.0);
  return f;
}

std::string kv_verdict(double total_bytes, double avail_bytes, double mem_fraction, std::int64_t cell_bytes,
                       std::int64_t requested_tokens) {
  const double rest = kv_rest_bytes(total_bytes, avail_bytes, mem_fraction);
  const std::int64_t tokens = kv_max_tokens(total_bytes, avail_bytes, mem_fraction, cell_bytes);
  const std::int64_t need = std::max<std::int64_t>(1, requested_tokens);
  const double f1 = kv_min_mem_fraction(total_bytes, avail_bytes, cell_bytes, 1);
  const double fr = kv_min_mem_fraction(total_bytes, avail_bytes, cell_bytes, need);
  std::ostringstream os;
  if (tokens >= need) {
    os << "Feasible: " << tokens << " KV tokens per rank (rest " << gib(rest) << " at mem_fraction "
       << mem_fraction << ")";
    if (requested_tokens > 0) os << ", enough for the requested " << requested_tokens;
    os << "; mem_fraction >= " << fraction_up(f1) << " gives at least one token.";
    return os.str();
  }
  if (avail_bytes <= 0) {
    os << "Not enough memory: the weights do not fit, free memory after loading them would be " << gib(avail_bytes)
       << " of total " << gib(total_bytes) << ", so no mem_fraction works: use a larger TP or a smaller quantization.";
    return os.str();
  }
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.4g%%", 100.0 * (1.0 - mem_fraction));
  os << "Not enough memory: after weights " << gib(avail_bytes) << " is free (avail), and mem_fraction "
     << mem_fraction << " keeps " << gib(total_bytes * (1.0 - mem_fraction)) << " (" << pct << " of total "
     << gib(total_bytes) << ") out of the KV cache, so rest = " << gib(rest);
  if (tokens == 0) os << " and no KV token fits";
  else os << " and only " << tokens << " of the requested " << requested_tokens << " tokens fit";
  if (f1 > 1.0) {
    os << "; no mem_fraction works, the weights and buffers leave less than one KV cell ("
       << cell_bytes << " B): use a larger TP or a smaller quantization.";
  } else {
    os << "; mem_fraction >= " << fraction_up(f1) << " gives at least one token";
    if (requested_tokens > 0) {
      if (fr > 1.0) os << " and no mem_fraction gives the requested " << requested_tokens << " tokens";
      else os << " and >= " << fraction_up(fr) << " gives the requested " << requested_tokens;
    }
    os << ".";
  }
  return os.str();
}

KvPoolSize size_kv_pool(double total_bytes, double avail_bytes, double mem_fraction, std::int64_t cell_bytes,
                        std::int64_t requested_tokens) {
  TPB_INPUT_CHECK(mem_fraction > 0.0 && mem_fraction <= 1.0,
                  "mem_fraction: expected a value in (0, 1], got " << mem_fraction);
  TPB_INPUT_CHECK(requested_tokens >= 0, "tokens: expected >= 0, got " << requested_tokens);
  KvPoolSize k;
  k.total_bytes = total_bytes;
  k.avail_bytes = avail_bytes;
  k.mem_fraction = mem_fraction;
  k.cell_bytes = cell_bytes;
  k.requested_tokens = requested_tokens;
  k.rest_bytes = kv_rest_bytes(total_bytes, avail_bytes, mem_fraction);
  k.max_tokens = kv_max_tokens(total_bytes, avail_bytes, mem_fraction, cell_bytes);
  k.feasible = k.max_tokens >= std::max<std::int64_t>(1, requested_tokens);
  k.min_mem_fraction = kv_min_mem_fraction(total_bytes, avail_bytes, cell_bytes, 1);
  k.min_mem_fraction_requested =
      requested_tokens > 0 ? kv_min_mem_fraction(total_bytes, avail_bytes, cell_bytes, requested_tokens) : 0.0;
  k.verdict = kv_verdict(total_bytes, avail_bytes, mem_fraction, cell_bytes, requested_tokens);
  return k;
}

MemoryPlan plan_memory(const PlanInput& in) {
  TPB_INPUT_CHECK(in.mem_fraction > 0.0 && in.mem_fraction <= 1.0,
                  "mem_fraction: expected a value in (0, 1], got " << in.mem_fraction);
  TPB_INPUT_CHECK(in.gpu_total_bytes > 0, "GPU memory: expected > 0 bytes, got " << in.gpu_total_bytes);
  TPB_INPUT_CHECK(in.cuda_context_bytes >= 0, "CUDA context: expected >= 0 bytes, got " << in.cuda_context_bytes);
  TPB_INPUT_CHECK(in.requested_tokens >= 0, "tokens: expected >= 0, got " << in.requested_tokens);
  in.config.validate_tp(in.tp);

  MemoryPlan p;
  p.input = in;
  ModelConfig config = in.config;
  if (!in.include_vision_tower) config.has_vision_tower = false;

  p.gpu_total_bytes = in.gpu_total_bytes;
  p.cuda_context_bytes = in.cuda_context_bytes;
  p.comm = comm_bytes(in.allreduce, in.tp, in.custom_max_bytes, in.nccl_channels, "allreduce backend",
                      in.nccl_over_sockets, in.interconnect, in.custom_on_pcie);
  p.allreduce_planned = p.comm.custom_blocked ? "nccl" : in.allreduce;
  // pcie-no-p2p: no peer access, it cannot run; pcie-p2p above TP 2: the PCIe rule keeps it off.
  const std::string blocked_verb = in.interconnect == Interconnect::pcie_no_p2p ? "cannot run" : "does not run";
  if (p.comm.custom_blocked)
    p.allreduce_note = "The custom allreduce " + blocked_verb + " on " + std::string(interconnect_name(in.interconnect)) + ": " +
                       p.comm.blocked_reason + "; " + in.allreduce +
                       " plans NCCL only, its buffers alone (tpbench's custom backend, SGLang and vLLM fall "
                       "back to NCCL there).";
  p.weights = weight_bytes(config, in.quant, in.tp);
  p.total_bytes = in.gpu_total_bytes - in.cuda_context_bytes - p.comm.total();
  TPB_INPUT_CHECK(p.total_bytes > 0, "GPU memory " << gib(in.gpu_total_bytes) << " is smaller than the CUDA context ("
                                                   << gib(in.cuda_context_bytes) << ") plus communicator buffers ("
                                                   << gib(p.comm.total()) << ")");
  p.avail_bytes = p.total_bytes - p.weights.bytes_per_rank;
  const double total = static_cast<double>(p.total_bytes), avail = static_cast<double>(p.avail_bytes);
  p.slack_bytes = total * (1.0 - in.mem_fraction);
  p.kv_cell_bytes = kv_cell_bytes(config, in.kv_dtype_bytes);
  const KvPoolSize pool = size_kv_pool(total, avail, in.mem_fraction, p.kv_cell_bytes, in.requested_tokens);
  p.rest_bytes = pool.rest_bytes;
  p.max_tokens = pool.max_tokens;
  p.kv_cache_bytes = p.max_tokens * p.kv_cell_bytes;
  p.feasible = pool.feasible;
  p.min_mem_fraction = pool.min_mem_fraction;
  p.min_mem_fraction_requested = pool.min_mem_fraction_requested;

  std::int64_t graph_pool_batch = 0;
  for (std::int64_t bs : in.graph_batch_sizes) {
    TPB_INPUT_CHECK(bs >= 1, "CUDA-graph batch sizes: expected >= 1, got " << bs);
    const std::int64_t bytes = activation_peak(config, in.tp, bs, 1).peak_bytes;
    p.graph_pools.push_back({bs, bytes});
    if (bytes > p.graph_pool_bytes) {
      p.graph_pool_bytes = bytes;
      graph_pool_batch = bs;
    }
  }
  p.activation = activation_peak(config, in.tp, in.activation_batch, in.activation_seq_len);
  p.slack_needed_bytes = p.graph_pool_bytes + p.activation.peak_bytes;
  p.slack_fits = p.slack_bytes >= static_cast<double>(p.slack_needed_bytes);
  p.max_mem_fraction_for_slack = 1.0 - static_cast<double>(p.slack_needed_bytes) / total;

  // The breakdown, top to bottom, every term in bytes per rank.
  auto& b = p.breakdown;
  b.push_back({"gpu total", in.gpu_total_bytes, '=', "cudaMemGetInfo total of one device"});
  b.push_back({"cuda context", in.cuda_context_bytes, '-', "context + libraries before the weights (gpu_catalog.h): measured on H200, estimated elsewhere"});
  if (p.comm.custom_bytes > 0)
    b.push_back({"comm: custom allreduce", p.comm.custom_bytes, '-',
                 "3 x " + std::to_string(in.custom_max_bytes) + " B max message + signal (IPC, metadata, rank data)"});
  if (p.comm.custom_blocked)
    b.push_back({"comm: custom allreduce", 0, ' ',
                 blocked_verb + " on " + std::string(interconnect_name(in.interconnect)) +
                     (in.interconnect == Interconnect::pcie_no_p2p ? " (no CUDA IPC peer access)"
                                                                   : " (more than two PCIe-only GPUs, not forced)") +
                     ": NCCL only"});
  if (p.comm.nccl_bytes > 0) {
    const std::string note =
        in.nccl_over_sockets
            ? nccl_socket_note(in.tp)
            : "ESTIMATE " + std::to_string(in.nccl_channels) + " channels x 10 MiB (SIMPLE+LL+LL128), NVLS off";
    b.push_back({"comm: nccl", p.comm.nccl_bytes, '-', note});
  }
  b.push_back({"total (free before weights)", p.total_bytes, '=', "the formula's `total`"});
  for (const auto& g : p.weights.groups)
    b.push_back({"weights: " + g.group, g.bytes_per_rank, '-', g.formats});
  b.push_back({"avail (free after weights)", p.avail_bytes, '=', "the formula's `avail`"});
  b.push_back({"slack total*(1-fraction)", std::llround(p.slack_bytes), '-',
               "holds the CUDA-graph pool and the activation peak"});
  b.push_back({"  cuda-graph pool", p.graph_pool_bytes, ' ',
               p.graph_pools.empty() ? std::string("no graphs captured")
                                     : "decode peak of batch " + std::to_string(graph_pool_batch) +
                                           ", one pool shared by all captured sizes"});
  b.push_back({"  activation peak", p.activation.peak_bytes, ' ',
               "batch " + std::to_string(in.activation_batch) + " x seq " + std::to_string(in.activation_seq_len) +
                   ", largest: " + p.activation.largest});
  b.push_back({"rest (KV cache budget)", std::llround(p.rest_bytes), '=', "avail - slack"});
  b.push_back({"kv cache", p.kv_cache_bytes, ' ',
               std::to_string(p.max_tokens) + " tokens x " + std::to_string(p.kv_cell_bytes) + " B cell"});

  p.assumptions.push_back("cuda context " + gib(in.cuda_context_bytes) +
                          " per rank: the context plus the libraries a serving process loads before its weights "
                          "(cuBLAS/cuBLASLt, NCCL, kernel modules), as tpbench's worker measured it on an H200 "
                          "(CUDA 13, TP1: 527 + 582 MiB); other GPU families are estimates");
  if (p.comm.nccl_bytes > 0 && in.nccl_over_sockets) {
    std::string line = "NCCL buffers over the socket transport (ranks sharing a GPU): 368 MiB + 14 MiB x " +
                       std::to_string(in.tp) + " ranks, as measured on an H200 at TP 2 and 4 (NCCL 2.28.9)";
    if (in.tp != 2 && in.tp != 4) line += "; an estimate at TP " + std::to_string(in.tp);
    p.assumptions.push_back(line);
  } else if (p.comm.nccl_bytes > 0) {
    std::string line = "NCCL buffers: " + std::to_string(in.nccl_channels) +
                       " ring channels x 10 MiB, NVLS off (an estimate; the meter will measure it)";
    if (in.interconnect != Interconnect::nvlink)
      line += "; the channel count is NVLink's: over PCIe NCCL likely opens fewer, and without P2P it may stage "
              "through host memory, so on " + std::string(interconnect_name(in.interconnect)) +
              " this is an upper bound, not measured (--nccl-channels N)";
    p.assumptions.push_back(line);
  }
  if (!p.weights.vision_note.empty()) p.assumptions.push_back(p.weights.vision_note);
  p.assumptions.push_back("activation and graph-pool models are upper-bound sketches of one layer's live "
                          "intermediates (planner.h); allocator fragmentation is not counted");

  p.verdict = pool.verdict;
  if (!p.slack_fits) {
    p.verdict += " Warning: the slack " + gib(p.slack_bytes) + " is smaller than the CUDA-graph pool + activation peak (" +
                 gib(static_cast<double>(p.slack_needed_bytes)) + "); mem_fraction <= " +
                 fraction_down(std::max(0.0, p.max_mem_fraction_for_slack)) + " leaves room for them.";
  }
  return p;
}

std::vector<FractionSweepPoint> sweep_mem_fraction(const PlanInput& input, const std::vector<std::string>& backends,
                                                   const std::vector<double>& fractions) {
  std::vector<FractionSweepPoint> out;
  for (const auto& backend : backends) {
    for (double f : fractions) {
      PlanInput in = input;
      in.allreduce = backend;
      in.mem_fraction = f;
      const MemoryPlan p = plan_memory(in);
      out.push_back({backend, f, p.comm.total(), p.max_tokens, p.feasible, p.slack_fits});
    }
  }
  return out;
}

}  // namespace tpb
