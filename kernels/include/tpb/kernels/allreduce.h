// Custom CUDA-IPC allreduce for GPUs of one host (one process per GPU): host launchers and
// the layout of the memory the ranks share. The communicator that owns the buffers lives in
// reference_engine/comm/custom/; the CPU reference of the arithmetic is allreduce_ref.h.
//
// Algorithm (kernels/allreduce/custom_allreduce.cu): each rank owns one device allocation,
// exported with cudaIpcGetMemHandle and opened by every peer, holding an AllreduceSignal
// followed by two data buffers of `buffer_bytes` (double buffering by call parity). A kernel
// first copies its input into its own buffer, then meets its peers at a per-block barrier,
// then reads the peers' buffers (one-shot: every rank reads everything; two-shot: reduce
// one slice per rank, barrier, gather the slices). Sums are fp32 in rank order 0..n-1,
// rounded once, so every rank and both algorithms produce bitwise identical results.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tpb/dtype.h"

namespace tpb {

constexpr int kAllreduceMaxRanks = 8;     // world sizes 2, 4, 6, 8 have kernels
constexpr int kAllreduceMaxBlocks = 256;  // grid cap; sizes the per-block flag arrays
constexpr int kAllreduceThreads = 512;    // threads per block (16-byte packs per block pass)

// What a rank's call is: the error report names both sides' with it. Each barrier flag carries
// it (AllreduceSignal::sync), so peers on different calls (a skipped call), different sizes or
// different algorithms fail at the barrier where they meet, naming both sides, instead of
// pairing their flags one barrier apart and summing the wrong halves from then on.
struct alignas(16) AllreduceCallTag {
  std::uint32_t call = 0;   // the rank's call_count at the call's start (its kernels completed before)
  std::uint32_t shape = 0;  // algorithm (bit 0: two-shot) | dtype << 1 (tpb::DType's value)
  std::uint64_t bytes = 0;  // message bytes
};
static_assert(sizeof(AllreduceCallTag) == 16, "layout shared between processes");

// Shared by all ranks of one communicator; each rank's lives at the start of its own IPC
// allocation. Peers write into `sync` of this rank; everything else is written by the owner.
// Flags only grow (wrap-safe comparison), so a captured graph replays without a reset
// (recover() zeroes the whole signal on every rank at once).
struct AllreduceSignal {
  // sync[b][r][f & 1]: the flag word (tpb/kernels/allreduce_flag.h) rank r's block b published to this rank with its
  // barrier f. Two slots: a peer can publish flag f + 1 before this rank has read f (it passed
  // barrier f and began the next), never f + 2, which needs this rank at f + 1 first.
  std::uint64_t sync[kAllreduceMaxBlocks][kAllreduceMaxRanks][2];
  // counter[b]: the last flag this rank's block b used (read at kernel start, stored at end).
  std::uint32_t counter[kAllreduceMaxBlocks];
  std::uint32_t call_count;   // kernels completed by this rank; its parity picks the data buffer
  std::uint32_t failed;       // an error code once a call failed: kernels then write NaN and stop
  std::uint32_t selftest[kAllreduceMaxRanks];  // peer-access self-test: peer r writes slot r
  // The two words every call changes with atomics, each on its own 128-byte line: an atomic
  // holds its line at the L2, and the loads of call_count and failed that every block's start
  // waits for must not queue behind it.
  alignas(128) std::uint32_t in_flight;    // 1 while a call runs: a second call meeting it (another stream) fails
  alignas(128) std::uint32_t blocks_done;  // blocks finished in the current call (last one bumps call_count)
};
static_assert(sizeof(AllreduceSignal) % 16 == 0, "data buffers after the signal stay 16-byte aligned");
static_assert(offsetof(AllreduceSignal, sync) == 0, "layout shared between processes");

enum class AllreduceAlgo { one_shot, two_shot };

// Error codes a failed call leaves in the error report (0 = none). Decoded by allreduce_error_text.
constexpr int kAllreduceErrorTimeout = 1;     // a peer never arrived at a barrier within the timeout
constexpr int kAllreduceErrorMismatch = 2;    // a peer arrived at the same barrier on another call
constexpr int kAllreduceErrorConcurrent = 3;  // two calls of one communicator ran at once

// The first failure a rank's kernels met, in host-mapped memory (written once per failure by
// the thread that won the race for AllreduceSignal::failed; `code` last, after a system fence).
struct AllreduceErrorReport {
  int code = 0;  // kAllreduceError*, 0 = none
  int peer = -1;  // the peer rank involved (timeout, mismatch); -1 where none
  AllreduceCallTag mine;    // this rank's call when it failed
  AllreduceCallTag theirs;  // the peer's call as its barrier flag said (mismatch only)
};

// Test hook: a delay of `ns` nanoseconds inside every block of this rank's kernels at one
// point, to widen the races the protocol must survive (tests/gpu/allreduce_stress_test.cpp).
enum class AllreduceDelayAt : int { none = 0, before_copy_in = 1, after_barrier = 2, between_stages = 3 };

// Everything a launch needs; plain values, so a captured graph holds them by value.
struct AllreduceLaunch {
  const void* in = nullptr;     // this rank's input, device memory, any alignment
  void* out = nullptr;          // output, device memory, any alignment; may equal `in`
  std::size_t count = 0;        // elements
  DType dtype = DType::bf16;
  int rank = 0;                 // this rank, 0..world-1
  int world = 0;                // ranks, one of 2, 4, 6, 8
  AllreduceSignal* signals[kAllreduceMaxRanks] = {};  // every rank's signal, mapped here
  void* buffers[kAllreduceMaxRanks] = {};  // every rank's data (2 halves of buffer_bytes), mapped here
  std::size_t buffer_bytes = 0;  // capacity of one half, bytes (multiple of 16)
  AllreduceErrorReport* report = nullptr;  // device view of this rank's host-mapped error report
  std::uint64_t timeout_ns = 0;  // longest spin at one barrier, nanoseconds
  int max_blocks = 0;            // grid cap for this launch, 1..kAllreduceMaxBlocks
  AllreduceDelayAt delay_at = AllreduceDelayAt::none;  // test hook (see AllreduceDelayAt)
  std::uint64_t delay_ns = 0;                           // test hook: the delay, nanoseconds
};

// Bytes of the allocation each rank exports for `buffer_bytes` of message capacity.
std::size_t allreduce_allocation_bytes(std::size_t buffer_bytes);
// Largest message (bytes) the kernels accept for `buffer_bytes` of capacity.
inline std::size_t allreduce_max_message_bytes(std::size_t buffer_bytes) { return buffer_bytes; }
bool allreduce_world_supported(int world);

// Enqueues one allreduce on `stream` (a cudaStream_t). Capturable into a CUDA graph.
void launch_custom_allreduce(AllreduceAlgo algo, const AllreduceLaunch& args, void* stream);

// Peer-access self-test, write half: writes `value` into signals[p]->selftest[rank] of every
// peer p through its IPC mapping. The owner later reads its own selftest slots back.
void launch_allreduce_selftest(AllreduceSignal* const* signals, int rank, int world,
                               std::uint32_t value, void* stream);
// Peer-access self-test, read half (the data path reads peers' memory, and some PCIe root
// complexes pass P2P writes but not reads): copies the first `bytes` (a multiple of 16) of
// every rank's data buffer, peers' through their mappings, into dst[r * bytes ...], this
// rank's device memory.
void launch_allreduce_selftest_read(void* const* buffers, int world, std::size_t bytes, void* dst, void* stream);

// Blocks of this launch's kernels that fit on one multiprocessor at once (the smallest over
// the one-shot and two-shot kernels of args.dtype and args.world; cudaOccupancy...): with the
// SM count, what decides whether every block of every rank sharing a GPU can be resident.
int allreduce_blocks_per_sm(DType dtype, int world);

// What a code in AllreduceErrorReport::code means, in a sentence.
const char* allreduce_error_text(int code);

}  // namespace tpb
