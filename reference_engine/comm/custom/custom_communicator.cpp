// CustomAllreduceCommunicator (see custom_communicator.h).
#include "reference_engine/comm/custom/custom_communicator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "tpb/check.h"
#include "tpb/cuda_check.h"

#if TPB_HAVE_NCCL
#include "reference_engine/comm/nccl/nccl_communicator.h"
#endif

namespace tpb {

namespace {

// Token a rank writes into each peer during the self-test: recognisable and rank-specific.
std::uint32_t selftest_token(int rank) { return 0x7b0c0000u | static_cast<std::uint32_t>(rank); }

// Device grid cap: one block per multiprocessor keeps every block resident at once, which
// the per-block barrier needs (a block waiting on a peer block must not starve it of an SM).
// Ranks sharing one GPU (under MPS their kernels run at once) split its multiprocessors, so
// the blocks of all of them still fit together: block b of rank r waits for block b of every
// peer on the same device.
int grid_cap(int device, int ranks_per_device) {
  int sms = 0;
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return std::max(1, std::min(sms / std::max(1, ranks_per_device), kAllreduceMaxBlocks));
}

}  // namespace

CustomAllreduceCommunicator::CustomAllreduceCommunicator(AllreduceAlgo algo, Bootstrap& bootstrap,
                                                         const CommOptions& options)
    : algo_(algo), rank_(bootstrap.rank()), size_(bootstrap.size()), device_(options.device) {
  TPB_CHECK(device_ >= 0, "custom allreduce needs a CUDA device (CommOptions::device = " << device_ << ")");
#if TPB_HAVE_NCCL
  nccl_ = std::make_unique<NcclCommunicator>(bootstrap, options);
#else
  TPB_FAIL("custom allreduce needs NCCL for its fallback, barrier and all_gather; this build has no NCCL");
#endif
  init_custom(bootstrap, options);
}

void CustomAllreduceCommunicator::init_custom(Bootstrap& bootstrap, const CommOptions& options) {
  TPB_CUDA_CHECK(cudaSetDevice(device_));
  if (!allreduce_world_supported(size_)) {
    unavailable_reason_ = "world size " + std::to_string(size_) + " has no custom kernel (2, 4, 6, 8): using nccl";
    return;  // every rank sees the same size, so every rank decides the same
  }
  buffer_bytes_ = (std::max<std::size_t>(options.max_bytes, 16) + 15) / 16 * 16;
  alloc_bytes_ = allreduce_allocation_bytes(buffer_bytes_);

  // Everything below that can fail locally is caught, so that every rank still takes part in
  // the all_gathers and all ranks agree on the verdict.
  std::string local_problem;
  cudaIpcMemHandle_t handle{};
  try {
    TPB_CUDA_CHECK(cudaMalloc(&local_alloc_, alloc_bytes_));
    TPB_CUDA_CHECK(cudaMemset(local_alloc_, 0, alloc_bytes_));
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    TPB_CUDA_CHECK(cudaIpcGetMemHandle(&handle, local_alloc_));
  } catch (const Error& e) {
    local_problem = std::string("IPC export failed: ") + e.what();
  }
  std::string mine(reinterpret_cast<const char*>(&handle), sizeof handle);
  mine += std::string(1, local_problem.empty() ? '1' : '0');
  // device ":" grid cap: the per-block barrier pairs block b of every rank, so every rank must
  // launch the same grid; the group takes the smallest cap any rank computed.
  const int local_cap = grid_cap(device_, options.ranks_per_device);
  mine += std::to_string(device_) + ":" + std::to_string(local_cap);
  const std::vector<std::string> handles = bootstrap.all_gather(mine);
  struct Exported {
    bool ok = false;  // the rank exported its buffer
    int device = -1;  // its CUDA ordinal
  };
  std::vector<Exported> exported(static_cast<std::size_t>(size_));
  int group_cap = local_cap;
  for (int r = 0; r < size_; ++r) {
    const std::string& h = handles[r];
    const auto colon = h.rfind(':');  // the handle's bytes may hold ':': the last one is ours
    if (h.size() <= sizeof handle + 1 || colon == std::string::npos || colon <= sizeof handle + 1) continue;
    exported[r] = {h[sizeof handle] == '1', std::stoi(h.substr(sizeof handle + 1, colon - (sizeof handle + 1)))};
    group_cap = std::min(group_cap, std::stoi(h.substr(colon + 1)));
  }

  for (int r = 0; r < size_ && local_problem.empty(); ++r) {
    const std::string& h = handles[r];
    if (!exported[r].ok) {
      local_problem = "rank " + std::to_string(r) + " could not export its buffer";
      break;
    }
    const int peer_device = exported[r].device;
    if (r == rank_) {
      launch_.signals[r] = static_cast<AllreduceSignal*>(local_alloc_);
      continue;
    }
    // A peer on this same GPU (shared placement) needs no peer access: its buffer opens
    // through IPC as a local allocation. The self-test below still proves the mapping.
    int can = 1;
    if (peer_device != device_ && (cudaDeviceCanAccessPeer(&can, device_, peer_device) != cudaSuccess || !can)) {
      (void)cudaGetLastError();
      local_problem = "no peer access from GPU " + std::to_string(device_) + " to GPU " + std::to_string(peer_device);
      break;
    }
    cudaIpcMemHandle_t peer_handle;
    std::memcpy(&peer_handle, h.data(), sizeof peer_handle);
    const cudaError_t e = cudaIpcOpenMemHandle(&peer_alloc_[r], peer_handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      peer_alloc_[r] = nullptr;
      local_problem = std::string("cudaIpcOpenMemHandle of rank ") + std::to_string(r) + "'s buffer failed: " +
                      cudaGetErrorString(e);
      break;
    }
    launch_.signals[r] = static_cast<AllreduceSignal*>(peer_alloc_[r]);
  }
  // Everyone has opened (or failed to open) the handles before anyone writes through them.
  bootstrap.barrier();

  // Self-test: write a token into every peer through the mapping, read our own slots back.
  if (local_problem.empty()) {
    try {
      launch_allreduce_selftest(launch_.signals, rank_, size_, selftest_token(rank_), nullptr);
      TPB_CUDA_CHECK(cudaDeviceSynchronize());
    } catch (const Error& e) {
      local_problem = std::string("peer-access self-test write failed: ") + e.what();
    }
  }
  bootstrap.barrier();  // all writes are done (each rank synchronized its device) before reading
  if (local_problem.empty()) {
    AllreduceSignal probe;
    TPB_CUDA_CHECK(cudaMemcpy(&probe, local_alloc_, sizeof probe, cudaMemcpyDeviceToHost));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || probe.selftest[r] == selftest_token(r)) continue;
      std::ostringstream os;
      os << "peer-access self-test: rank " << r << " wrote 0x" << std::hex << selftest_token(r) << " through its "
         << "mapping but this rank read 0x" << probe.selftest[r];
      local_problem = os.str();
      break;
    }
  }
  const std::vector<std::string> verdicts = bootstrap.all_gather(local_problem);
  for (int r = 0; r < size_; ++r) {
    if (!verdicts[r].empty()) {
      unavailable_reason_ = "rank " + std::to_string(r) + ": " + verdicts[r] + ": using nccl";
      release_ipc();
      return;
    }
  }

  TPB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_error_), sizeof(int), cudaHostAllocMapped));
  *host_error_ = 0;
  int* device_error = nullptr;
  TPB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_error), host_error_, 0));
  launch_.rank = rank_;
  launch_.world = size_;
  for (int r = 0; r < size_; ++r)
    launch_.buffers[r] = reinterpret_cast<char*>(launch_.signals[r]) + sizeof(AllreduceSignal);
  launch_.buffer_bytes = buffer_bytes_;
  launch_.host_error = device_error;
  launch_.timeout_ns = static_cast<std::uint64_t>(options.timeout_s * 1e9);
  launch_.max_blocks = group_cap;
  custom_ok_ = true;
  bootstrap.barrier();  // nobody launches a kernel before every rank is ready
}

void CustomAllreduceCommunicator::release_ipc() {
  for (int r = 0; r < kAllreduceMaxRanks; ++r) {
    if (peer_alloc_[r] != nullptr) (void)cudaIpcCloseMemHandle(peer_alloc_[r]);
    peer_alloc_[r] = nullptr;
  }
  if (local_alloc_ != nullptr) (void)cudaFree(local_alloc_);
  local_alloc_ = nullptr;
  alloc_bytes_ = 0;
  custom_ok_ = false;
}

CustomAllreduceCommunicator::~CustomAllreduceCommunicator() {
  (void)cudaSetDevice(device_);
  // Peers may still read our buffer in their last kernel: drain our device first. A rank
  // whose peers vanished still returns because the kernels' spin-waits are bounded.
  (void)cudaDeviceSynchronize();
  release_ipc();
  if (host_error_ != nullptr) (void)cudaFreeHost(host_error_);
}

std::string CustomAllreduceCommunicator::name() const {
  if (!custom_ok_) return "nccl";
  return algo_ == AllreduceAlgo::one_shot ? "custom-oneshot" : "custom-twoshot";
}

std::size_t CustomAllreduceCommunicator::memory_bytes() const {
  std::size_t nccl_bytes = 0;
#if TPB_HAVE_NCCL
  nccl_bytes = nccl_->memory_bytes();
#endif
  return alloc_bytes_ + nccl_bytes;
}

bool CustomAllreduceCommunicator::custom_path_for(std::size_t bytes) const {
  return custom_ok_ && (bytes + 15) / 16 * 16 <= buffer_bytes_;
}

void CustomAllreduceCommunicator::check_errors() const {
  if (host_error_ == nullptr) return;
  const int code = *reinterpret_cast<volatile int*>(host_error_);
  TPB_CHECK(code == 0, "custom allreduce rank " << rank_ << " (GPU " << device_ << "): " << allreduce_error_text(code)
                                                << "; the communicator is unusable from here on");
}

void CustomAllreduceCommunicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype,
                                             void* stream) {
  all_reduce_with(algo_, in, out, count, dtype, stream);
}

void CustomAllreduceCommunicator::all_reduce_with(AllreduceAlgo algo, const void* in, void* out,
                                                  std::size_t count, DType dtype, void* stream) {
  const std::size_t bytes = count * dtype_size(dtype);
  if (!custom_path_for(bytes)) {
#if TPB_HAVE_NCCL
    if (custom_ok_) {
      ++size_fallbacks_;
      largest_fallback_bytes_ = std::max(largest_fallback_bytes_, bytes);
    }
    nccl_->all_reduce(in, out, count, dtype, stream);
    return;
#endif
  }
  check_errors();
  custom_calls_.add(algo == AllreduceAlgo::one_shot ? "custom-oneshot" : "custom-twoshot", bytes);
  AllreduceLaunch a = launch_;
  a.in = in;
  a.out = out;
  a.count = count;
  a.dtype = dtype;
  launch_custom_allreduce(algo, a, stream);
}

std::vector<AllreduceCalls> CustomAllreduceCommunicator::allreduce_calls() const {
#if TPB_HAVE_NCCL
  return merge_allreduce_calls(custom_calls_.entries(), nccl_->allreduce_calls());
#else
  return custom_calls_.entries();
#endif
}

void CustomAllreduceCommunicator::reset_allreduce_calls() {
  custom_calls_.clear();
  size_fallbacks_ = 0;  // fallback_reason() then speaks of the calls since this reset
  largest_fallback_bytes_ = 0;
#if TPB_HAVE_NCCL
  nccl_->reset_allreduce_calls();
#endif
}

std::string CustomAllreduceCommunicator::fallback_reason() const {
  if (!custom_ok_) return unavailable_reason_;
  if (size_fallbacks_ == 0) return {};
  return std::to_string(size_fallbacks_) + " message(s) exceeded the registered buffer of " +
         std::to_string(buffer_bytes_) + " bytes (largest " + std::to_string(largest_fallback_bytes_) +
         " bytes): those ran on nccl";
}

void CustomAllreduceCommunicator::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                                             void* stream) {
#if TPB_HAVE_NCCL
  nccl_->all_gather(in, out, count_per_rank, dtype, stream);
#endif
}

void CustomAllreduceCommunicator::barrier() {
  // nccl's barrier drains this device (custom kernels end by themselves: bounded spins). When
  // it fails, a timed-out custom kernel is the likelier root cause: report that first.
#if TPB_HAVE_NCCL
  try {
    nccl_->barrier();
  } catch (const Error&) {
    check_errors();
    throw;
  }
#endif
  check_errors();
}

}  // namespace tpb
