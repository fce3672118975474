// CustomAllreduceCommunicator: the "custom-oneshot" and "custom-twoshot" backends, the
// CUDA-IPC allreduce of kernels/allreduce (one process per GPU, GPUs of one host).
//
// Init: allocate this rank's signal + double data buffer (2 x max_bytes), export it with
// cudaIpcGetMemHandle, exchange handles through the Bootstrap, open every peer's, then run a
// peer-access self-test (each rank writes a token into every peer's signal through the
// mapping; each rank reads its own back). Every rank shares its verdict, so all ranks agree
// on whether the custom path runs. Otherwise, and for messages above max_bytes, the call
// goes to an NCCL communicator created alongside, and fallback_reason() says why.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/factory.h"
#include "tpb/kernels/allreduce.h"

namespace tpb {

class NcclCommunicator;

class CustomAllreduceCommunicator final : public Communicator {
 public:
  CustomAllreduceCommunicator(AllreduceAlgo algo, Bootstrap& bootstrap, const CommOptions& options);
  ~CustomAllreduceCommunicator() override;
  CustomAllreduceCommunicator(const CustomAllreduceCommunicator&) = delete;
  CustomAllreduceCommunicator& operator=(const CustomAllreduceCommunicator&) = delete;

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override;
  // all_gather and barrier go through the NCCL communicator (bounded by the timeout).
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override;
  void barrier() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // "custom-oneshot" / "custom-twoshot", or "nccl" when the custom path is unusable.
  std::string name() const override;
  // IPC allocation (signal + 2 x max_bytes) plus the fallback NCCL communicator's memory.
  std::size_t memory_bytes() const override;
  // Why the custom path is off (set at construction, never cleared), else how many messages
  // since construction (or the last reset_allreduce_calls) were too large for the registered
  // buffer and ran on NCCL; empty when every message ran on the custom kernels.
  std::string fallback_reason() const override;
  // Calls on the custom kernels ("custom-oneshot" / "custom-twoshot", as all_reduce_with ran
  // them) and on the NCCL fallback ("nccl": no peer access, or a message above max_bytes).
  std::vector<AllreduceCalls> allreduce_calls() const override;
  // Also restarts fallback_reason()'s count of messages too large for the buffer.
  void reset_allreduce_calls() override;

  // The same allreduce with an explicit algorithm (auto picks per message size).
  void all_reduce_with(AllreduceAlgo algo, const void* in, void* out, std::size_t count, DType dtype, void* stream);
  // True when a message of `bytes` runs on the custom kernels (not the NCCL fallback).
  bool custom_path_for(std::size_t bytes) const;
  bool custom_available() const { return custom_ok_; }
  std::size_t max_bytes() const { return buffer_bytes_; }
  NcclCommunicator& nccl() { return *nccl_; }
  // Throws a tpb::Error if a kernel reported a timed-out barrier (reads a host-mapped flag,
  // does not synchronize). all_reduce and barrier call it too.
  void check_errors() const;

 private:
  void init_custom(Bootstrap& bootstrap, const CommOptions& options);
  void release_ipc();

  AllreduceAlgo algo_;
  int rank_ = 0;
  int size_ = 0;
  int device_ = 0;
  std::unique_ptr<NcclCommunicator> nccl_;
  bool custom_ok_ = false;
  std::string unavailable_reason_;       // why the custom path is off (custom_ok_ false)
  std::size_t size_fallbacks_ = 0;       // messages above buffer_bytes_ that ran on NCCL
  std::size_t largest_fallback_bytes_ = 0;
  AllreduceCallTally custom_calls_;      // calls the custom kernels ran (NCCL's are counted there)
  std::size_t buffer_bytes_ = 0;   // capacity of one data half, bytes
  std::size_t alloc_bytes_ = 0;    // this rank's IPC allocation, bytes
  void* local_alloc_ = nullptr;    // this rank's allocation (signal at offset 0)
  void* peer_alloc_[kAllreduceMaxRanks] = {};  // peers' allocations opened here (own: nullptr)
  AllreduceLaunch launch_;         // the per-call arguments that never change
  int* host_error_ = nullptr;      // host view of the mapped error flag
};

}  // namespace tpb
