// MLA attention microbenchmarks (attention_bench.cpp): tpb::gpu::mla_decode_attention at the
// Kimi-K2.5 TP2 shapes over batch x seq_len, against the device copy bandwidth; the causal
// prefill attention's kernels at Kimi-K2.5's widths, in useful TFLOP/s.
#pragma once

#include "bench/bench_ranks.h"

namespace tpb::bench {

// Registers attention/mla_decode/... and attention/mla_prefill/... benchmarks for this rank's device (ctx.rank).
void register_attention_benchmarks(RankContext& ctx);

}  // namespace tpb::bench
