// "engine" — the reference engine's prefill or decode steps, timed (one process per rank).
//   params.mode        "prefill" | "decode" | "logits"
//   params.tp          int     must equal the group's world size
//   params.batch_size  int     sequences per step
//   params.seq_len     int     prefill: tokens per sequence; decode: tokens in the KV cache
//                              before each timed step (the cache is rewound to it every step)
//   params.allreduce   string  communicator backend (default "shm")
//   model              {config_path, overrides, weights ("synthetic" | checkpoint dir), seed}
//   measure.warmup / .iterations / .repetitions (defaults 1 / 5 / 1)
//   Tokens are a pure function of (seed, sequence, position), so every rank, backend and TP
//   runs the same inputs. Result: latency_us (one sample per timed step, steady clock, each
//   after a barrier: suite/measure/measure.h's loop; interleaved_off_latency_us beside it in a case of
//   an instrumentation sweep, measure.interleave_instrumentation), work {tokens_per_step} (the
//   record's throughput.tokens_per_s derives from it and the mean latency), digests.logits (FNV-1a 64 of the last step's fp32
//   logits, identical on every rank), metrics {tokens_per_step, weight_bytes, kv_cache_bytes,
//   kv_tokens, allreduces_per_step, ...}, outputs.logits (the first <= 4096 fp32 logits of the
//   last step, in [batch, tokens, vocab] order, for tolerance checks across TP and devices), comm.
//   params.instrumentation "off" | "timing" | "trace" | "debug" (suite/measure/instrumentation.h): the
//   engine runs on an ObservedCommunicator at every level; from timing on, metrics.instrumentation
//   .phases holds per-step time of step, embed, attention, mlp, moe, allreduce, lm_head,
//   all_gather, logits; trace adds a Chrome trace (metrics.trace_file); debug adds
//   metrics.instrumentation.debug (NaN/Inf counts, max abs, l2 and greedy token per row of a
//   copy of the last logits). Every level: metrics.alloc_bytes (the workload's buffers, by
//   purpose in .instrumentation.alloc), metrics.vocab_size
//   and metrics.compute_dtype ("f32") for tp_invariant.
//   The engine (weights loaded) is kept in the worker across cases with the same model, TP
//   and backend.
//
// device "cuda" (CUDA builds): the bf16 GpuEngine (reference_engine/gpu/gpu_engine.h), rank r
//   on device LOCAL_RANK, params.allreduce a GPU backend (default nccl), params.cuda_graph
//   decodes through graph replay (at least 2 warm-up steps, so every timed step replays).
//   latency_us from device events around each step; a decode case whose prompt exceeds 8192
//   tokens (batch * seq_len) fills its KV cache synthetically instead of prefilling
//   (metrics.kv_fill); logits above 64M values are digested at each sequence's last position
//   (metrics.logits_rows). Extra metrics: step_us and allreduce_us (medians) and
//   allreduce_share = allreduce_us / step_us, where allreduce_us times the step's own
//   allreduce calls (same sizes, backend and stream) alone; activation_bytes, graph_replays,
//   compute_dtype "bf16". The engine and its weights are kept across cases of one model and
//   TP; the backend, graph mode and sizes of each case are set on it.
//
// "logits" mode (used by `tpbench logits --tp N`): params.input_ids [[...], ...] (equal
//   lengths), params.prefill K (0 = all), params.out (path; rank 0 writes the float32
//   tensor `logits` [batch, seq, vocab] as safetensors). Result digests.logits as above.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/model/engine.h"
#include "suite/workloads/workload.h"

namespace tpb {

RankResult run_engine_workload(const CaseSpec& spec, WorkerState& state);

// Logits [batch, seq, vocab] for ids [batch][seq]: the first `prefill` tokens (0 or >= seq:
// all) in one prefill, the rest decoded one at a time. Identical on every rank.
std::vector<float> engine_logits(Engine& engine, const std::vector<std::vector<std::int64_t>>& ids,
                                 std::int64_t prefill);

// Reads an ids.json file (a list of equal-length lists of token ids). InputError naming the
// file and the JSON path on anything else.
std::vector<std::vector<std::int64_t>> read_input_ids(const nlohmann::json& ids, const std::string& source);

}  // namespace tpb
