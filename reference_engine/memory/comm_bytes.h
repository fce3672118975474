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
// nccl over sockets: in shared placement (suite/launch/placement.h) the ranks of a group share one
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
//
// Interconnect: the custom IPC allreduce needs CUDA peer access between every pair of GPUs (each
// rank's kernels write straight into its peers' buffers, mapped with cudaIpcOpenMemHandle).
// NVLink and PCIe with P2P give it; a PCIe box without P2P (consumer boards, ACS/IOMMU left on,
// many VMs) does not. There tpbench's custom communicator frees its IPC buffers after its
// peer-access check fails and runs everything on its NCCL communicator
// (reference_engine/comm/custom/custom_communicator.cpp), as SGLang and vLLM disable theirs
// ("your platform lacks GPU P2P capability"): so a custom or auto backend plans NCCL's buffers
// only. Ranks sharing one GPU (shared placement) open each other's buffers as local memory and
// need no peer access: the interconnect does not apply to them.
// More than two GPUs joined only by PCIe (pcie-p2p, TP > 2): SGLang's and vLLM's stock custom
// allreduce turns itself off there ("not supported on more than two PCIe-only GPUs"), and so
// does tpbench's (reference_engine/comm/custom_allreduce_policy.h) unless the scenario's
// comm.custom_on_pcie forces it (`tpbench plan --custom-on-pcie`; a deployment that runs a PCIe
// IPC allreduce, as FlashInfer's does, plans it so): the plan follows the same rule.
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

// How the GPUs of one TP group reach each other (see the file comment).
enum class Interconnect {
  nvlink,       // NVLink / NVSwitch: peer access between every pair
  pcie_p2p,     // PCIe with peer-to-peer: peer access over PCIe
  pcie_no_p2p,  // PCIe without peer access: no custom allreduce
};

// "nvlink" | "pcie-p2p" | "pcie-no-p2p", as --interconnect and --json spell them.
const char* interconnect_name(Interconnect interconnect);
// The inverse; anything else throws InputError naming `what` and the three values.
Interconnect parse_interconnect(const std::string& name, const std::string& what);

// Empty when the custom IPC allreduce runs on `world_size` GPUs joined by `interconnect`;
// otherwise why not, one clause ("it needs CUDA IPC peer access between the GPUs, which
// pcie-no-p2p lacks"). `custom_on_pcie`: the scenario forces it on more than two PCIe-only GPUs.
// The one rule every plan follows (comm_bytes below), the communicator's at run time.
std::string custom_allreduce_blocker(Interconnect interconnect, int world_size, bool custom_on_pcie);

struct CommBytes {
  std::int64_t custom_bytes = 0;  // custom allreduce IPC + metadata + rank data, per rank
  std::int64_t nccl_bytes = 0;    // NCCL buffers, per rank (NVLink: estimate; sockets: measured fit)
  bool custom_blocked = false;    // the backend asks for the custom allreduce but the interconnect
                                  // cannot run it: NCCL only (custom_bytes 0)
  std::string blocked_reason;     // custom_allreduce_blocker's clause when custom_blocked, else empty
  std::int64_t total() const { return custom_bytes + nccl_bytes; }
};

// `backend`: a name in the backend table (backends.h); anything else throws InputError naming
// `what` (e.g. "--allreduce") and the table's names. `nccl_over_sockets`: NCCL (also the custom
// backends' own NCCL communicator) reaches its peers over sockets, so its buffers are
// nccl_socket_buffer_bytes and `nccl_channels` does not apply; the ranks then share one GPU, so
// `interconnect` does not apply either. `interconnect`: a backend with custom buffers on an
// interconnect where custom_allreduce_blocker is not empty gets NCCL's buffers only.
CommBytes comm_bytes(const std::string& backend, int world_size, std::int64_t custom_max_bytes,
                     int nccl_channels, const std::string& what, bool nccl_over_sockets = false,
                     Interconnect interconnect = Interconnect::nvlink, bool custom_on_pcie = false);

}  // namespace tpb
