// Device memory that each allreduce backend's buffers take per rank, allocated before a
// serving engine reads `total` (ARCHITECTURE.md, "Memory planner"), so it shrinks `total`.
//
// custom-oneshot / custom-twoshot (vLLM/SGLang-style IPC allreduce), per rank:
//   IPC data buffer      max_bytes (peers map it; mapping a peer's buffer costs no local memory)
//   metadata + temp      max_bytes + the signal struct (vLLM allocates meta_size() + max_size)
//   rank data            max_bytes (registered-pointer table; vLLM/SGLang allocate 8 MiB)
//   = 3 x max_bytes + signal ~= 24 MiB at the usual 8 MiB max message (MODEL.md).
// nccl: an ESTIMATE until the GPU meter measures it (issue 6). NCCL's P2P transport gives
//   each connection one receive buffer per protocol:
//     SIMPLE  NCCL_BUFFSIZE, default 4 MiB
//     LL      DEFAULT_LL_BUFFSIZE   = 8 lines/thread x 512 threads x 8 steps x 16 B = 512 KiB
//     LL128   DEFAULT_LL128_BUFFSIZE = 120 elems/thread x 640 threads x 8 steps x 8 B = 4800 KiB
//   rounded up to the 2 MiB cuMem granularity (NCCL_CUMEM_ENABLE, default since 2.19) = 10 MiB.
//   Within one node NCCL uses rings (trees span nodes); each channel has one receive
//   connection per rank, so bytes = channels x 10 MiB, independent of world size > 1, and 0
//   at world size 1 (no peers). Channels: 32 assumed for NVLink/NVSwitch Hopper systems
//   (NCCL's "32 coll channels" on 8 x H100/H200); NVLS (NVLink SHARP) buffers are NOT
//   counted: tpbench runs with NCCL_NVLS_ENABLE=0 (it would add hundreds of MiB).
// nccl over sockets: in shared placement (suite/placement.h) the ranks of a group share one
//   GPU, each with its own NCCL_HOSTID, so NCCL connects them over its socket transport and
//   allocates other device buffers than the estimate above. MEASURED on one H200 (NCCL
//   2.28.9, driver 580.159.04, under MPS, 2026-12-01), NcclCommunicator::memory_bytes() per
//   rank: 415,236,096 B (396 MiB) at TP 2 and 444,596,224 B (424 MiB) at TP 4; the line
//   368 MiB + 14 MiB x world_size goes through both exactly. Measured at TP 2 and 4 only: an
//   ESTIMATE at other world sizes (and on other NCCL versions); 0 at world size 1.
// auto: custom below a size threshold, NCCL above, so both sets of buffers. custom-oneshot
//   and custom-twoshot too: tpbench's custom communicator (like SGLang's and vLLM's) keeps
//   an NCCL communicator for messages above max_bytes, the all_gather and the fallback.
// shm: host memory only, 0 device bytes.
// Which of these a backend allocates is its row's `buffers` in the backend table
// (reference_engine/comm/backends.h).
#pragma once

#include <cstdint>
#include <string>

namespace tpb {

inline constexpr std::int64_t kMiB = 1LL << 20;
inline constexpr std::int64_t kGiB = 1LL << 30;

// vLLM/SGLang's default custom-allreduce max message size.
inline constexpr std::int64_t kCustomAllreduceDefaultMaxBytes = 8 * kMiB;
// vLLM's Signal struct (start/end flags, 36 blocks x 8 ranks x 2 x uint32 + flags), rounded up.
inline constexpr std::int64_t kCustomAllreduceSignalBytes = 4096;
// NCCL defaults, see the file comment.
inline constexpr std::int64_t kNcclSimpleBufferBytes = 4 * kMiB;
inline constexpr std::int64_t kNcclLlBufferBytes = 8LL * 512 * 8 * 16;
inline constexpr std::int64_t kNcclLl128BufferBytes = 120LL * 640 * 8 * 8;
inline constexpr std::int64_t kNcclAllocGranularityBytes = 2 * kMiB;
inline constexpr int kNcclDefaultChannels = 32;
// NCCL's socket-transport buffers, fit to the two measured points (see the file comment).
inline constexpr std::int64_t kNcclSocketBaseBytes = 368 * kMiB;
inline constexpr std::int64_t kNcclSocketPerRankBytes = 14 * kMiB;

// Custom IPC allreduce buffers of one rank for messages up to `max_bytes`; 0 at world size 1.
std::int64_t custom_allreduce_bytes(std::int64_t max_bytes, int world_size);

// NCCL's receive buffers of one rank in a single-node ring communicator (see file comment).
std::int64_t nccl_buffer_bytes(int world_size, int channels = kNcclDefaultChannels);

// NCCL's device buffers of one rank whose peers it reaches over the socket transport (shared
// placement): 368 MiB + 14 MiB x world_size, measured at world sizes 2 and 4; 0 at world size 1.
std::int64_t nccl_socket_buffer_bytes(int world_size);

struct CommBytes {
  std::int64_t custom_bytes = 0;  // custom allreduce IPC + metadata + rank data, per rank
  std::int64_t nccl_bytes = 0;    // NCCL buffers, per rank (NVLink: estimate; sockets: measured fit)
  std::int64_t total() const { return custom_bytes + nccl_bytes; }
};

// `backend`: a name in the backend table (backends.h); anything else throws InputError naming
// `what` (e.g. "--allreduce") and the table's names. `nccl_over_sockets`: NCCL (also the custom
// backends' own NCCL communicator) reaches its peers over sockets, so its buffers are
// nccl_socket_buffer_bytes and `nccl_channels` does not apply.
CommBytes comm_bytes(const std::string& backend, int world_size, std::int64_t custom_max_bytes,
                     int nccl_channels, const std::string& what, bool nccl_over_sockets = false);

}  // namespace tpb
