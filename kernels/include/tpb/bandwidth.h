// Collective bandwidth as nccl-tests defines it (nccl-tests doc/PERFORMANCE.md), the one
// formula of tpbench's records (suite/measure/measure.h) and of tpb_bench's counters:
//   algbw = bytes / time, with time the AVERAGE time of one operation (GB/s, 1e9 bytes);
//   busbw = algbw * bus factor, the factor making busbw comparable with the hardware's peak
//           bandwidth whatever the rank count: allreduce 2(n-1)/n.
// Header-only so that the kernels' benchmarks and the suite share it without a dependency.
#pragma once

namespace tpb {

// bytes moved per rank by one operation, mean_seconds its average time: GB/s.
inline double algbw_GBps(double bytes, double mean_seconds) { return bytes / mean_seconds / 1e9; }

// busbw / algbw for an allreduce over `ranks` ranks: 2(n-1)/n (each rank sends and receives
// (n-1)/n of the data twice: reduce-scatter, then all-gather). 0 for one rank: nothing crosses a link.
inline double allreduce_bus_factor(int ranks) {
  return ranks > 1 ? 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) : 0.0;
}

}  // namespace tpb
