// Programmatic dependent launch (Hopper and later): the engine's kernels are launched so that
// the next kernel in the stream (or the captured graph) is scheduled while the one before it
// finishes, instead of after. Each such kernel starts by waiting for the grids before it
// (griddepcontrol.wait), so what it reads and writes is ordered exactly as before: the same
// bits, only the launch latency between two kernels hidden behind the first one's tail.
//
// Chained: the gemvs, the grouped expert GEMMs, the norms, rope, the latent-KV row, the router,
// the MoE plan, gather and combine, silu-and-mul, the embedding. Not chained: the decode
// attention's split and merge kernels (with them chained, a batch-1 decode step at 8K context
// measured 0.8 % slower than without any; without them, 2 % faster, on an H200), the prefill
// attention, cuBLAS and the collectives.
#pragma once

namespace tpb::gpu {

// Whether kernels launched from now on (and graphs captured from now on) use it: on by default
// where the device supports it (compute capability 9.0 and later), off when the environment
// sets TPB_PROGRAMMATIC_LAUNCH=0. A process-wide setting, read at each launch.
bool programmatic_launch();
void set_programmatic_launch(bool on);

// Whether `kernel` (a __global__ function) was compiled with its wait: from PTX for compute
// capability 9.0 or later. A build for an older architecture that runs on a Hopper through
// just-in-time compilation has no griddepcontrol in its kernels, so they must not be launched
// programmatically. Remembered per kernel.
bool kernel_waits_for_prior_grids(const void* kernel);

}  // namespace tpb::gpu
