// The layers of a full-width Kimi-K2.5 decode step, as one tensor-parallel rank runs them
// (layer_bench.cpp): each timed inside one engine's step, against the time to read the
// weights it touches.
#pragma once

#include "bench/bench_ranks.h"

namespace tpb::bench {

void register_layer_benchmarks(RankContext& ctx);

}  // namespace tpb::bench
