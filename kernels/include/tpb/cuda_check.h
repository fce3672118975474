// CUDA and NCCL members of the tpb/check.h family. Include only from CUDA-enabled code.
#pragma once

#include <cuda_runtime_api.h>

#include "tpb/check.h"

#define TPB_CUDA_CHECK(expr)                                                        \
  do {                                                                              \
    cudaError_t tpb_cuda_err_ = (expr);                                             \
    if (tpb_cuda_err_ != cudaSuccess)                                               \
      TPB_DETAIL_FAIL(false, #expr, "CUDA error " << cudaGetErrorName(tpb_cuda_err_) \
                                                  << ": " << cudaGetErrorString(tpb_cuda_err_)); \
  } while (0)

// After every kernel launch: launch-configuration errors surface here, not later.
#define TPB_CUDA_CHECK_LAUNCH() TPB_CUDA_CHECK(cudaGetLastError())

#if defined(TPB_HAVE_NCCL) && TPB_HAVE_NCCL
#include <nccl.h>
#define TPB_NCCL_CHECK(expr)                                                         \
  do {                                                                               \
    ncclResult_t tpb_nccl_res_ = (expr);                                             \
    if (tpb_nccl_res_ != ncclSuccess && tpb_nccl_res_ != ncclInProgress)             \
      TPB_DETAIL_FAIL(false, #expr, "NCCL error " << ncclGetErrorString(tpb_nccl_res_) \
                                                  << " (" << ncclGetLastError(nullptr) << ")"); \
  } while (0)
#endif
