// NcclCommunicator (see nccl_communicator.h).
#include "reference_engine/comm/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/device.h"

namespace tpb {

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::f32: return ncclFloat32;
  }
  TPB_FAIL("unknown dtype");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string nccl_runtime_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return {};
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

NcclCommunicator::NcclCommunicator(Bootstrap& bootstrap, const CommOptions& options)
    : rank_(bootstrap.rank()), size_(bootstrap.size()), device_(options.device), timeout_s_(options.timeout_s) {
  TPB_CHECK(device_ >= 0, "nccl backend needs a CUDA device (CommOptions::device = " << device_ << ")");
  TPB_CUDA_CHECK(cudaSetDevice(device_));
  TPB_CUDA_CHECK(cudaFree(nullptr));  // create the context before measuring free memory
  cudaStream_t stream;
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  barrier_stream_ = stream;
  TPB_CUDA_CHECK(cudaMalloc(&scratch_, 16));
  std::size_t free_before = 0, total = 0;  // this rank's own memory (shared placement: its share)
  TPB_CHECK(current_device_memory(&free_before, &total), "nccl: cannot read device memory");

  ncclUniqueId id;
  std::string mine;
  if (rank_ == 0) {
    TPB_NCCL_CHECK(ncclGetUniqueId(&id));
    mine.assign(reinterpret_cast<const char*>(&id), sizeof id);
  }
  const std::vector<std::string> all = bootstrap.all_gather(mine);
  TPB_CHECK(all.size() == static_cast<std::size_t>(size_) && all[0].size() == sizeof id,
            "nccl: bootstrap did not deliver rank 0's unique id");
  std::memcpy(&id, all[0].data(), sizeof id);

  // A blocking communicator: a non-blocking one runs every collective's launch through a
  // helper thread (measured on 2 x H200: ~46 us per eager ncclAllReduce instead of ~6 us).
  // Init may still wait forever for a peer that never comes, so it runs on a thread of its
  // own and this one gives up after the timeout (the stuck thread is left behind; the case
  // fails with this error and its process exits).
  struct InitJob {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    ncclResult_t result = ncclInProgress;
    ncclComm_t comm = nullptr;
  };
  auto job = std::make_shared<InitJob>();
  std::thread([job, id, size = size_, rank = rank_, dev = device_] {
    cudaSetDevice(dev);
    ncclComm_t c = nullptr;
    const ncclResult_t r = ncclCommInitRank(&c, size, id, rank);
    std::lock_guard<std::mutex> lock(job->mu);
    job->result = r;
    job->comm = c;
    job->done = true;
    job->cv.notify_all();
  }).detach();
  {
    std::unique_lock<std::mutex> lock(job->mu);
    const bool done = job->cv.wait_for(lock, std::chrono::duration<double>(timeout_s_), [&] { return job->done; });
    TPB_CHECK(done, "nccl rank " << rank_ << ": ncclCommInitRank did not complete within " << timeout_s_
                                 << " s (a peer never joined)");
    TPB_CHECK(job->result == ncclSuccess,
              "ncclCommInitRank failed on rank " << rank_ << ": " << ncclGetErrorString(job->result));
    comm_ = job->comm;
  }

  // One warm-up collective so the lazily allocated channel buffers are counted.
  barrier();
  std::size_t free_after = 0;
  TPB_CHECK(current_device_memory(&free_after, &total), "nccl: cannot read device memory");
  memory_bytes_ = free_before > free_after ? free_before - free_after : 0;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    if (aborted_) {
      // already aborted: nothing left to free
    } else {
      (void)cudaSetDevice(device_);
      ncclResult_t state = ncclSuccess;
      (void)ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess)
        (void)ncclCommDestroy(comm_);
      else
        (void)ncclCommAbort(comm_);
    }
  }
  if (scratch_ != nullptr) (void)cudaFree(scratch_);
  if (barrier_stream_ != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(barrier_stream_));
}

void NcclCommunicator::abort_and_fail(const std::string& why) {
  if (!aborted_ && comm_ != nullptr) {
    (void)ncclCommAbort(comm_);
    aborted_ = true;
  }
  TPB_FAIL("nccl rank " << rank_ << ": " << why << " (communicator aborted)");
}

void NcclCommunicator::check_async_error(const char* what) {
  TPB_CHECK(!aborted_, "nccl rank " << rank_ << ": communicator was aborted earlier; " << what << " refused");
  ncclResult_t state = ncclSuccess;
  TPB_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
  if (state != ncclSuccess && state != ncclInProgress)
    abort_and_fail(std::string(what) + ": asynchronous NCCL error " + ncclGetErrorString(state));
}

void NcclCommunicator::wait_ready(const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    TPB_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) abort_and_fail(std::string(what) + ": " + ncclGetErrorString(state));
    if (seconds_since(t0) > timeout_s_)
      abort_and_fail(std::string(what) + ": peers did not arrive within " + std::to_string(timeout_s_) + " s");
    std::this_thread::yield();
  }
}

void NcclCommunicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) {
  calls_.add("nccl", count * dtype_size(dtype));
  enqueue_all_reduce(in, out, count, dtype, stream);
}

void NcclCommunicator::enqueue_all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) {
  check_async_error("all_reduce");
  ncclResult_t r = ncclAllReduce(in, out, count, nccl_type(dtype), ncclSum, comm_, static_cast<cudaStream_t>(stream));
  if (r == ncclInProgress)
    wait_ready("ncclAllReduce");
  else if (r != ncclSuccess)
    abort_and_fail(std::string("ncclAllReduce: ") + ncclGetErrorString(r));
}

void NcclCommunicator::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                                  void* stream) {
  check_async_error("all_gather");
  ncclResult_t r = ncclAllGather(in, out, count_per_rank, nccl_type(dtype), comm_, static_cast<cudaStream_t>(stream));
  if (r == ncclInProgress)
    wait_ready("ncclAllGather");
  else if (r != ncclSuccess)
    abort_and_fail(std::string("ncclAllGather: ") + ncclGetErrorString(r));
}

void NcclCommunicator::barrier() {
  TPB_CUDA_CHECK(cudaSetDevice(device_));
  // Finish this device's work first, off the calling thread, so a collective stuck on a dead
  // peer is bounded by the timeout: aborting the communicator releases its kernels.
  const auto t0 = std::chrono::steady_clock::now();
  auto sync = std::async(std::launch::async, [dev = device_] {
    cudaSetDevice(dev);
    return cudaDeviceSynchronize();
  });
  while (sync.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
    ncclResult_t state = ncclSuccess;
    (void)ncclCommGetAsyncError(comm_, &state);
    if ((state != ncclSuccess && state != ncclInProgress) || seconds_since(t0) > timeout_s_) {
      if (!aborted_) {
        (void)ncclCommAbort(comm_);
        aborted_ = true;
      }
      sync.wait();
      TPB_FAIL("nccl rank " << rank_ << ": barrier: device work did not finish within " << timeout_s_
                            << " s (NCCL state " << ncclGetErrorString(state) << "); communicator aborted");
    }
  }
  TPB_CUDA_CHECK(sync.get());
  // Then a one-element collective that every rank must join.
  auto stream = static_cast<cudaStream_t>(barrier_stream_);
  enqueue_all_reduce(scratch_, scratch_, 1, DType::f32, stream);  // not a caller's allreduce: not counted
  while (true) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) TPB_CUDA_CHECK(e);
    check_async_error("barrier");
    if (seconds_since(t0) > timeout_s_)
      abort_and_fail("barrier: peers did not arrive within " + std::to_string(timeout_s_) + " s");
    std::this_thread::yield();
  }
}

}  // namespace tpb
