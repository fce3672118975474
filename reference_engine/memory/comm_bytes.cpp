// Communicator buffer bytes per backend; the model and its sources are in comm_bytes.h, which
// buffers each backend allocates in the backend table (reference_engine/comm/backends.h).
#include "reference_engine/memory/comm_bytes.h"

#include "reference_engine/comm/backends.h"
#include "tpb/check.h"

namespace tpb {

std::int64_t custom_allreduce_bytes(std::int64_t max_bytes, int world_size) {
  TPB_INPUT_CHECK(max_bytes > 0, "custom allreduce max message size: expected > 0 bytes, got " << max_bytes);
  TPB_INPUT_CHECK(world_size >= 1, "world size: expected >= 1, got " << world_size);
  if (world_size == 1) return 0;  // serving engines skip the custom allreduce at TP 1
  return 3 * max_bytes + kCustomAllreduceSignalBytes;
}

std::int64_t nccl_buffer_bytes(int world_size, int channels) {
  TPB_INPUT_CHECK(world_size >= 1, "world size: expected >= 1, got " << world_size);
  TPB_INPUT_CHECK(channels >= 1, "NCCL channels: expected >= 1, got " << channels);
  if (world_size == 1) return 0;
  const std::int64_t per_connection = kNcclSimpleBufferBytes + kNcclLlBufferBytes + kNcclLl128BufferBytes;
  const std::int64_t rounded =
      (per_connection + kNcclAllocGranularityBytes - 1) / kNcclAllocGranularityBytes * kNcclAllocGranularityBytes;
  return channels * rounded;
}

std::int64_t nccl_socket_buffer_bytes(int world_size) {
  TPB_INPUT_CHECK(world_size >= 1, "world size: expected >= 1, got " << world_size);
  if (world_size == 1) return 0;
  return kNcclSocketBaseBytes + kNcclSocketPerRankBytes * world_size;
}

const char* interconnect_name(Interconnect interconnect) {
  switch (interconnect) {
    case Interconnect::nvlink: return "nvlink";
    case Interconnect::pcie_p2p: return "pcie-p2p";
    case Interconnect::pcie_no_p2p: return "pcie-no-p2p";
  }
  return "?";
}

Interconnect parse_interconnect(const std::string& name, const std::string& what) {
  for (Interconnect i : {Interconnect::nvlink, Interconnect::pcie_p2p, Interconnect::pcie_no_p2p})
    if (name == interconnect_name(i)) return i;
  TPB_INPUT_FAIL(what << ": expected nvlink, pcie-p2p or pcie-no-p2p, got '" << name << "'");
}

std::string custom_allreduce_blocker(Interconnect interconnect, int world_size, bool custom_on_pcie) {
  if (interconnect == Interconnect::pcie_no_p2p)
    return std::string("it needs CUDA IPC peer access between the GPUs, which ") + interconnect_name(interconnect) +
           " lacks";
  if (interconnect == Interconnect::pcie_p2p && world_size > 2 && !custom_on_pcie)
    return "on more than two GPUs joined only by PCIe tpbench's custom allreduce stays off, as SGLang's and vLLM's "
           "do, unless comm.custom_on_pcie (plan: --custom-on-pcie) forces it";
  return "";
}

CommBytes comm_bytes(const std::string& backend, int world_size, std::int64_t custom_max_bytes, int nccl_channels,
                     const std::string& what, bool nccl_over_sockets, Interconnect interconnect,
                     bool custom_on_pcie) {
  const auto nccl = [&] {
    return nccl_over_sockets ? nccl_socket_buffer_bytes(world_size) : nccl_buffer_bytes(world_size, nccl_channels);
  };
  const BackendInfo* row = find_backend(backend);
  TPB_INPUT_CHECK(row != nullptr, what << ": expected one of " << backend_list() << ", got '" << backend << "'");
  CommBytes b;
  switch (row->buffers) {
    case BackendBuffers::none: break;  // host memory only
    case BackendBuffers::nccl: b.nccl_bytes = nccl(); break;
    case BackendBuffers::custom_and_nccl:
      // The custom backends keep an NCCL communicator beside their IPC buffers (messages above
      // max_bytes, all_gather, fallback), as SGLang and vLLM do: both sets of buffers, unless
      // the GPUs lack peer access; then only the NCCL one (ranks sharing a GPU need none).
      b.blocked_reason = nccl_over_sockets ? "" : custom_allreduce_blocker(interconnect, world_size, custom_on_pcie);
      b.custom_blocked = !b.blocked_reason.empty();
      b.custom_bytes = b.custom_blocked ? 0 : custom_allreduce_bytes(custom_max_bytes, world_size);
      b.nccl_bytes = nccl();
      break;
  }
  return b;
}

}  // namespace tpb
