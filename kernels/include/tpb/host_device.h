// TPB_HOST_DEVICE marks a header-only function that CPU code and CUDA kernels share: in a file
// nvcc compiles it becomes __host__ __device__, elsewhere it is an ordinary inline function.
#pragma once

#if defined(__CUDACC__)
#define TPB_HOST_DEVICE __host__ __device__
#else
#define TPB_HOST_DEVICE
#endif
