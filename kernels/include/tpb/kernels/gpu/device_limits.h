// Limits of the current CUDA device that kernels size themselves by, asked once per device.
#pragma once

namespace tpb::gpu {

// The current device's shared memory per block, static and dynamic together
// (cudaDevAttrMaxSharedMemoryPerBlockOptin): 227 KiB on 9.0 and 10.x, 163 KiB on 8.0, 99 KiB on
// 8.6, 8.9 and 12.x (RTX PRO 6000). Asked once per device ordinal; thread-safe.
int device_smem_optin_bytes();

}  // namespace tpb::gpu
