// Decode-attention microbenchmarks (attention_bench.cpp): tpb::gpu::mla_decode_attention at the
// Kimi-K2.5 TP2 shapes over batch x seq_len, against the device copy bandwidth.
#pragma once

#include "bench/bench_ranks.h"

namespace tpb::bench {

// Registers attention/decode/... benchmarks for this rank's device (ctx.rank).
void register_attention_benchmarks(RankContext& ctx);

}  // namespace tpb::bench
