// Hardware probes for `tpbench qualify` and for the roofline numbers the engine benchmarks
// compare against: memory bandwidth, a matrix-product rate, peer bandwidth. Each probe
// measures; none returns a datasheet number.
//
// Conventions (as nccl-tests and METHOD.md count them): a copy of B bytes moves 2B through
// device memory (read + write); a GEMM of m x n x k does 2mnk floating-point operations.
// Inputs are random, never zeros (zeros flatter tensor cores).
#pragma once

#include <cstddef>

namespace tpb {

struct ProbeTiming {
  double value = 0;        // the rate: GB/s (1e9 bytes/s) or GFLOP/s / TFLOP/s as named
  double median_s = 0;     // median time of one repetition, seconds
  int repetitions = 0;     // timed repetitions after warm-up
};

// CPU: memcpy of `bytes` between two buffers, counting read + write. GB/s.
ProbeTiming cpu_copy_bandwidth(std::size_t bytes, int repetitions);
// CPU: fp32 GEMM (cache-blocked loops, one thread) of m x n x k. GFLOP/s.
ProbeTiming cpu_gemm_rate(int m, int n, int k, int repetitions);

// GPU (CUDA builds; throws tpb::Error without CUDA or without the device):
// device-to-device copy on `device`, read + write counted. GB/s.
ProbeTiming gpu_copy_bandwidth(int device, std::size_t bytes, int repetitions);
// bf16 x bf16 -> bf16 GEMM through cuBLAS with fp32 accumulation, m x n x k. TFLOP/s.
ProbeTiming gpu_bf16_gemm_rate(int device, int m, int n, int k, int repetitions);
// cudaMemcpyPeerAsync from `src` to `dst` (one direction, `bytes` each). GB/s of payload.
ProbeTiming gpu_peer_bandwidth(int src, int dst, std::size_t bytes, int repetitions);
// Whether `src` can map `dst`'s memory (cudaDeviceCanAccessPeer).
bool gpu_can_access_peer(int src, int dst);

}  // namespace tpb
