#include "reference_engine/comm/local/local_communicator.h"

#include <cuda_runtime_api.h>

#include "tpb/check.h"
#include "tpb/cuda_check.h"

namespace tpb {

LocalCommunicator::LocalCommunicator(int size, int rank) : size_(size), rank_(rank) {
  TPB_CHECK(size >= 1 && rank >= 0 && rank < size, "LocalCommunicator: rank " << rank << " of " << size);
}

void LocalCommunicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) {
  if (in != out)
    TPB_CUDA_CHECK(cudaMemcpyAsync(out, in, count * dtype_size(dtype), cudaMemcpyDeviceToDevice,
                                   static_cast<cudaStream_t>(stream)));
}

void LocalCommunicator::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) {
  const std::size_t bytes = count_per_rank * dtype_size(dtype);
  TPB_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(out) + static_cast<std::size_t>(rank_) * bytes, in, bytes,
                                 cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
}

void LocalCommunicator::barrier() { TPB_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace tpb
