// Dense-GEMM and routed-expert-GEMM microbenchmarks (gemm_bench.cpp, expert_bench.cpp), and
// the pieces they share: the device limits they compare against and a random fill.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/bench_ranks.h"

namespace tpb::bench {

// Kimi-K2.5 TP2 dense projections (Linear, cuBLASLt) at decode and prefill rows.
void register_gemm_benchmarks(RankContext& ctx);
// expert_gemm_grouped at the Kimi TP2 expert shapes, batch 1..256, top 8 of 384 experts.
void register_expert_benchmarks(RankContext& ctx);

// Measured once per process on `device` (hw_probes.h): device-to-device copy bandwidth
// (GB/s, read + write counted) and the cuBLAS bf16 GEMM rate at 8192^3 (TFLOP/s).
struct DeviceLimits {
  double copy_GBps = 0;
  double gemm_TFLOPs = 0;
};
const DeviceLimits& device_limits(int device);

// Fills `count` bf16 elements at `dst` with non-zero random values in [-1, 1) (a 1 Mi-element
// random block, repeated by device-to-device copies: quick even for tens of GB).
void fill_random_bf16(void* dst, std::size_t count, std::uint32_t seed);

}  // namespace tpb::bench
