// INT4 routed-expert GEMM microbenchmarks (expert_int4_bench.cpp): the two INT4 kernels beside
// the bf16 paths at Kimi-K2.5's expert shape, and the decode MoE layer's INT4 GEMMs.
#pragma once

#include "bench/bench_ranks.h"

namespace tpb::bench {

void register_expert_int4_benchmarks(RankContext& ctx);

}  // namespace tpb::bench
