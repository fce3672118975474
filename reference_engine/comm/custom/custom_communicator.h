// CustomAllreduceCommunicator: the "custom-oneshot" and "custom-twoshot" backends, the
// CUDA-IPC allreduce of kernels/allreduce (one process per rank, GPUs of one host).
//
// Init (every step collective, so all ranks reach the same verdict):
// 1. Agreement: the ranks compare what decides a path (buffer size, algorithm, the PCIe
//    setting); a difference throws on every rank, naming both values (agreement.h).
// 2. Placement: each rank's GPU UUID is exchanged. Ranks on one GPU are counted from them
//    (never from a setting), and each rank's grid is capped so that the blocks of all of them
//    are resident at once (SM count x blocks per SM from the occupancy API), which the
//    per-block barrier needs; where that cannot hold, the custom path is refused with the reason.
// 3. Interconnect: more than two GPUs that NVLink does not join all pairwise (NVML) run NCCL,
//    the rule vLLM and SGLang apply to PCIe-only groups, unless CommOptions::custom_on_pcie.
// 4. Buffers: allocate this rank's signal + double data buffer (2 x max_bytes), export, open
//    every peer's, then a peer-access self-test that both writes (a token into every peer's
//    signal) and reads (a pattern from every peer's data buffer, the direction the data path
//    uses: some root complexes pass P2P writes but not reads).
// Any refusal leaves the NCCL communicator created alongside in charge; fallback_reason()
// says why. Messages above max_bytes go to NCCL too.
//
// Calls: every kernel publishes (call index, bytes, algorithm, dtype) with its barrier flags
// and checks its peers' after the barrier. A timeout, a mismatch or a second call in flight
// fails the call: `out` is written with NaN, and check_errors() throws (barrier() and the
// engine's synchronize() call it). recover() (collective) makes the communicator usable again.
//
// One stream: calls of one communicator must not overlap (the kernels share its counters);
// an overlap is detected on the device and fails as above.
//
// Teardown (collective, the destructor): drain this GPU, barrier (every peer's last call has
// finished reading this rank's buffer), close the peers' handles, barrier (no peer maps this
// rank's buffer any more), free. A communicator destroyed while a CUDA graph that captured one
// of its calls still exists keeps its buffers (they are the graph's) and says so on stderr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/factory.h"
#include "tpb/kernels/allreduce.h"

namespace tpb {

class NcclCommunicator;
struct CapturedGraphLedger;

class CustomAllreduceCommunicator final : public Communicator {
 public:
  CustomAllreduceCommunicator(AllreduceAlgo algo, Bootstrap& bootstrap, const CommOptions& options);
  // The same on an NCCL communicator of the caller's (fallback, barriers, all_gather), which
  // must outlive this one: creating and destroying many custom communicators then costs no
  // NCCL initialisation each (the teardown stress test makes 1000).
  CustomAllreduceCommunicator(AllreduceAlgo algo, Bootstrap& bootstrap, const CommOptions& options,
                              NcclCommunicator& shared_nccl);
  ~CustomAllreduceCommunicator() override;  // collective: see the file comment
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
  // IPC allocation (signal + 2 x max_bytes) plus the fallback NCCL communicator's memory (an
  // owned one only: a shared one is counted by its owner).
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
  // Throws a tpb::Error when a call of this rank failed (timeout, mismatch with a peer, calls
  // overlapping), naming the call and, for a mismatch, both ranks' calls. Reads a host-mapped
  // report; does not synchronize. Keeps throwing until recover().
  void check_errors() const override;

  // The same allreduce with an explicit algorithm (auto picks per message size).
  void all_reduce_with(AllreduceAlgo algo, const void* in, void* out, std::size_t count, DType dtype, void* stream);
  // Collective: after a failed call, every rank drains its GPU, meets the others, zeroes its
  // signal and its report, and meets them again; the communicator then runs as new.
  void recover();
  // True when a message of `bytes` runs on the custom kernels (not the NCCL fallback).
  bool custom_path_for(std::size_t bytes) const;
  bool custom_available() const { return custom_ok_; }
  std::size_t max_bytes() const { return buffer_bytes_; }
  NcclCommunicator& nccl() { return *nccl_; }
  // Ranks of the group on this rank's GPU (from the exchanged UUIDs) and the grid cap every
  // rank launches with (the smallest any rank computed).
  int ranks_on_this_gpu() const { return ranks_on_gpu_; }
  int grid_blocks() const { return launch_.max_blocks; }
  // Test hook: this rank's kernels wait `ns` at `at` (AllreduceDelayAt) in every block.
  void set_test_delay(AllreduceDelayAt at, std::uint64_t ns);

 private:
  // Both constructors' common part: the graph ledger, then init_custom (the ledger is
  // released again when init_custom throws).
  void start(Bootstrap& bootstrap, const CommOptions& options);
  void init_custom(Bootstrap& bootstrap, const CommOptions& options);
  // Empty when this rank's placement and the group's interconnect allow the custom path,
  // else why not (steps 2 and 3 of the file comment); sets ranks_on_gpu_ and *local_cap.
  std::string placement_problem(const std::vector<std::string>& uuids, const CommOptions& options, int* local_cap);
  // The write-and-read self-test through the opened mappings (step 4); empty when it passed.
  std::string peer_access_problem(Bootstrap& bootstrap);
  void note_capture(void* stream);
  // Closes the peers' handles, meets them (through `meet`), frees this rank's allocation.
  template <typename Meet>
  void release_ipc(Meet&& meet);

  AllreduceAlgo algo_;
  int rank_ = 0;
  int size_ = 0;
  int device_ = 0;
  std::unique_ptr<NcclCommunicator> owned_nccl_;  // null when the caller's is shared
  NcclCommunicator* nccl_ = nullptr;
  bool custom_ok_ = false;
  std::string unavailable_reason_;       // why the custom path is off (custom_ok_ false)
  std::size_t size_fallbacks_ = 0;       // messages above buffer_bytes_ that ran on NCCL
  std::size_t largest_fallback_bytes_ = 0;
  AllreduceCallTally custom_calls_;      // calls the custom kernels ran (NCCL's are counted there)
  int ranks_on_gpu_ = 1;           // ranks of the group on this rank's GPU (UUIDs)
  double timeout_s_ = 0;           // a barrier's longest wait, seconds
  std::size_t buffer_bytes_ = 0;   // capacity of one data half, bytes
  std::size_t alloc_bytes_ = 0;    // this rank's IPC allocation, bytes
  void* local_alloc_ = nullptr;    // this rank's allocation (signal at offset 0)
  void* peer_alloc_[kAllreduceMaxRanks] = {};  // peers' allocations opened here (own: nullptr)
  AllreduceLaunch launch_;         // the per-call arguments that never change
  AllreduceErrorReport* report_ = nullptr;  // host view of the mapped error report
  CapturedGraphLedger* graphs_ = nullptr;   // graphs holding captured calls (shared with them)
};

}  // namespace tpb
