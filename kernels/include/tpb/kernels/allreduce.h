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

// Shared by all ranks of one communicator; each rank's lives at the start of its own IPC
// allocation. Peers write into `sync` of this rank; everything else is written by the owner.
// Flags only grow (wrap-safe comparison), so a captured graph replays without a reset.
struct AllreduceSignal {
  // sync[b][r]: the latest barrier flag that rank r's block b has published to this rank.
  std::uint32_t sync[kAllreduceMaxBlocks][kAllreduceMaxRanks];
  // counter[b]: the last flag this rank's block b used (read at kernel start, stored at end).
  std::uint32_t counter[kAllreduceMaxBlocks];
  std::uint32_t call_count;   // kernels completed by this rank; its parity picks the data buffer
  std::uint32_t blocks_done;  // blocks finished in the current call (last one bumps call_count)
  std::uint32_t failed;       // non-zero once a barrier timed out: kernels then do nothing
  std::uint32_t pad0;
  std::uint32_t selftest[kAllreduceMaxRanks];  // peer-access self-test: peer r writes slot r
};
static_assert(sizeof(AllreduceSignal) % 16 == 0, "data buffers after the signal stay 16-byte aligned");
static_assert(offsetof(AllreduceSignal, sync) == 0, "layout shared between processes");

enum class AllreduceAlgo { one_shot, two_shot };

// Error codes the kernel leaves in `host_error` (0 = none). Decoded by allreduce_error_text.
constexpr int kAllreduceErrorTimeout = 1;

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
  int* host_error = nullptr;     // device view of a host-mapped int; the kernel writes error codes
  std::uint64_t timeout_ns = 0;  // longest spin at one barrier, nanoseconds
  int max_blocks = 0;            // grid cap for this launch, 1..kAllreduceMaxBlocks
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

// "peer rank 1 never arrived at barrier ..." for a code left in host_error.
const char* allreduce_error_text(int code);

}  // namespace tpb
