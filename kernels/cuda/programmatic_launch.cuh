// The device and host halves of programmatic dependent launch (tpb/kernels/gpu/programmatic_launch.h).
// A kernel launched with launch_chained must call wait_for_prior_grids() before it reads or
// writes global memory that another kernel of the stream touches: it may be running while the
// kernel before it still is. allow_next_grid() after the wait lets the next kernel be
// scheduled; it comes after the wait so that at most one kernel waits ahead of the running one.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/programmatic_launch.h"

namespace tpb::gpu::detail {

__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Every kernel the engine launches through this starts with wait_for_prior_grids(), then
// allow_next_grid().
__device__ __forceinline__ void chain_after_prior_grids() {
  wait_for_prior_grids();
  allow_next_grid();
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream serialization when
// programmatic_launch() is on. Launch errors are checked here.
template <typename... Params, typename... Args>
void launch_chained(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                    Args... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = programmatic_launch() && kernel_waits_for_prior_grids(reinterpret_cast<const void*>(kernel)) ? 1 : 0;
  TPB_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...));
}

}  // namespace tpb::gpu::detail
