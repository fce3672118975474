// One full-width Kimi-K2.5 MoE decoder layer in decode, as one tensor-parallel rank runs it
// (layer_bench.cpp): the layer's time against the time to read the weights it touches.
#pragma once

#include "bench/bench_ranks.h"

namespace tpb::bench {

void register_layer_benchmarks(RankContext& ctx);

}  // namespace tpb::bench
