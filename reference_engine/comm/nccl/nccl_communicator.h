// NcclCommunicator: the "nccl" backend. One process per GPU; the unique id travels through
// the launcher's Bootstrap. Every host-side wait on peers is bounded by CommOptions::timeout_s:
// init runs on a helper thread that is given up on after the timeout; barrier() drains the
// device on a helper thread while polling ncclCommGetAsyncError, and on an async error or a
// timeout it calls ncclCommAbort (which releases NCCL's kernels) and throws a tpb::Error
// naming the step. Collectives check the async error state before enqueueing.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/factory.h"

namespace tpb {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Bootstrap& bootstrap, const CommOptions& options);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override;
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override;
  void barrier() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  // Device memory NCCL took for this communicator: free memory before init minus after init
  // and one warm-up collective (NCCL allocates its channel buffers lazily), bytes.
  std::size_t memory_bytes() const override { return memory_bytes_; }
  // Every call runs here: one entry, "nccl" (barrier()'s own collective is not counted).
  std::vector<AllreduceCalls> allreduce_calls() const override { return calls_.entries(); }
  void reset_allreduce_calls() override { calls_.clear(); }

  // Throws if NCCL reported an asynchronous error (a peer failed, a network error).
  void check_async_error(const char* what);
  // Waits (polling) until the last enqueue finished its asynchronous part; aborts on timeout.
  void wait_ready(const char* what);

 private:
  [[noreturn]] void abort_and_fail(const std::string& why);
  // ncclAllReduce with the async-error checks, uncounted (all_reduce counts, then calls it).
  void enqueue_all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream);

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  int device_ = 0;
  double timeout_s_ = 60.0;
  void* barrier_stream_ = nullptr;  // cudaStream_t for barrier()'s collective
  void* scratch_ = nullptr;         // 16 bytes of device memory for barrier()
  std::size_t memory_bytes_ = 0;
  bool aborted_ = false;
  AllreduceCallTally calls_;  // all_reduce calls since construction or the last reset
};

// "2.28.9" for the NCCL library loaded at run time.
std::string nccl_runtime_version();

}  // namespace tpb
