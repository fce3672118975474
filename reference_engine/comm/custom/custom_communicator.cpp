// CustomAllreduceCommunicator (see custom_communicator.h).
#include "reference_engine/comm/custom/custom_communicator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "reference_engine/comm/agreement.h"
#include "reference_engine/comm/custom_allreduce_policy.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/device.h"

#if TPB_HAVE_NCCL
#include "reference_engine/comm/nccl/nccl_communicator.h"
#endif

namespace tpb {

// The CUDA graphs that captured a call of one communicator and still exist: each captured call
// hands a reference to its graph as a CUDA user object, whose destructor (a CUDA-internal
// thread, no CUDA calls allowed) only counts down. The communicator holds one reference too;
// the last one out deletes the ledger.
struct CapturedGraphLedger {
  std::atomic<int> live_graph_refs{0};  // captured calls whose graph (or an instance of it) lives
  std::atomic<int> holders{1};          // the communicator + every live user object
};

namespace {

void drop_ledger_ref(CapturedGraphLedger* ledger) {
  if (ledger->holders.fetch_sub(1) == 1) delete ledger;
}

void CUDART_CB graph_released(void* p) {
  auto* ledger = static_cast<CapturedGraphLedger*>(p);
  ledger->live_graph_refs.fetch_sub(1);
  drop_ledger_ref(ledger);
}

// Token a rank writes into each peer during the self-test: recognisable and rank-specific.
std::uint32_t selftest_token(int rank) { return 0x7b0c0000u | static_cast<std::uint32_t>(rank); }

// Word i of the pattern rank r leaves at the start of its data buffer for the read self-test.
std::uint32_t selftest_word(int rank, std::size_t i) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 0x9e3779b9u ^ (static_cast<std::uint32_t>(rank) + 1) * 0x85ebca6bu;
  x ^= x >> 15;
  return x * 0x2c1b3c6du;
}

constexpr std::size_t kSelftestReadBytes = 4096;  // per rank, at most the buffer

const char* algo_text(std::uint32_t shape) { return (shape & 1u) != 0 ? "two-shot" : "one-shot"; }

std::string tag_text(const AllreduceCallTag& t) {
  std::ostringstream os;
  os << "call #" << t.call << " (" << t.bytes << " bytes, " << algo_text(t.shape) << ", "
     << dtype_name(static_cast<DType>(t.shape >> 1)) << ")";
  return os.str();
}

// This process's SM count on `device`, as CUDA reports it to this context. Not checked here:
// whether the driver lowers it under an MPS active-thread percentage (the tests run MPS
// without one); where it does not, the grid is sized for the whole GPU and only the halving
// in custom_allreduce_grid_cap protects a limited client.
int visible_sms(int device) {
  int sms = 0;
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace

CustomAllreduceCommunicator::CustomAllreduceCommunicator(AllreduceAlgo algo, Bootstrap& bootstrap,
                                                         const CommOptions& options)
    : algo_(algo), rank_(bootstrap.rank()), size_(bootstrap.size()), device_(options.device) {
  TPB_CHECK(device_ >= 0, "custom allreduce needs a CUDA device (CommOptions::device = " << device_ << ")");
#if TPB_HAVE_NCCL
  owned_nccl_ = std::make_unique<NcclCommunicator>(bootstrap, options);
  nccl_ = owned_nccl_.get();
#else
  TPB_FAIL("custom allreduce needs NCCL for its fallback, barrier and all_gather; this build has no NCCL");
#endif
  start(bootstrap, options);
}

CustomAllreduceCommunicator::CustomAllreduceCommunicator(AllreduceAlgo algo, Bootstrap& bootstrap,
                                                         const CommOptions& options, NcclCommunicator& shared_nccl)
    : algo_(algo), rank_(bootstrap.rank()), size_(bootstrap.size()), device_(options.device), nccl_(&shared_nccl) {
  TPB_CHECK(device_ >= 0, "custom allreduce needs a CUDA device (CommOptions::device = " << device_ << ")");
  start(bootstrap, options);
}

void CustomAllreduceCommunicator::start(Bootstrap& bootstrap, const CommOptions& options) {
  graphs_ = new CapturedGraphLedger;
  try {
    init_custom(bootstrap, options);
  } catch (...) {
    drop_ledger_ref(graphs_);  // the destructor does not run for a constructor that throws
    throw;
  }
}

std::string CustomAllreduceCommunicator::placement_problem(const std::vector<std::string>& uuids,
                                                           const CommOptions& options, int* local_cap) {
  const std::string& mine = uuids[static_cast<std::size_t>(rank_)];
  ranks_on_gpu_ = static_cast<int>(std::count(uuids.begin(), uuids.end(), mine));
  // Every block of every rank on this GPU must be resident at once: block b of this rank
  // waits for block b of each peer, so a block that cannot start holds up the whole group.
  // One block per SM is the tuned shape (NOTES.md); the occupancy API says how many fit, and
  // half of that is left to other kernels that may hold SMs meanwhile (the engine's own on
  // other streams, a neighbour process under MPS): where two blocks fit per SM (TP 2 and 4:
  // 51 and 64 registers a thread) this is the tuned grid unchanged; the TP 6 and 8 one-shot
  // kernels (94 and 119 registers) fit once per SM and get half the SMs.
  std::string why;
  *local_cap = custom_allreduce_grid_cap(visible_sms(device_), allreduce_blocks_per_sm(DType::bf16, size_),
                                         ranks_on_gpu_, kAllreduceMaxBlocks, &why);
  if (*local_cap < 1) return "GPU " + mine + ": " + why;
  return custom_allreduce_pcie_refusal(uuids, options.custom_on_pcie, gpus_nvlink_connected);
}

void CustomAllreduceCommunicator::init_custom(Bootstrap& bootstrap, const CommOptions& options) {
  TPB_CUDA_CHECK(cudaSetDevice(device_));
  timeout_s_ = options.timeout_s;
  if (!allreduce_world_supported(size_)) {
    unavailable_reason_ = "world size " + std::to_string(size_) + " has no custom kernel (2, 4, 6, 8): using nccl";
    return;  // every rank sees the same size, so every rank decides the same
  }
  buffer_bytes_ = (std::max<std::size_t>(options.max_bytes, 16) + 15) / 16 * 16;
  // 1. What decides a path is the same on every rank, or every rank throws here.
  require_agreement(bootstrap, "custom allreduce max_bytes", std::to_string(buffer_bytes_));
  require_agreement(bootstrap, "custom allreduce algorithm", algo_ == AllreduceAlgo::one_shot ? "one-shot" : "two-shot");
  require_agreement(bootstrap, "comm.custom_on_pcie", options.custom_on_pcie ? "true" : "false");

  // 2 and 3. Placement and interconnect, from every rank's GPU UUID.
  const std::vector<std::string> uuids = bootstrap.all_gather(device_uuid(device_));
  int local_cap = 0;
  const std::string problem = placement_problem(uuids, options, &local_cap);
  const std::vector<std::string> placement_verdicts = bootstrap.all_gather(problem + "|" + std::to_string(local_cap));
  int group_cap = kAllreduceMaxBlocks;
  for (int r = 0; r < size_; ++r) {
    const std::string& v = placement_verdicts[static_cast<std::size_t>(r)];
    const auto bar = v.rfind('|');
    if (bar != 0) {
      unavailable_reason_ = "rank " + std::to_string(r) + ": " + v.substr(0, bar) + ": using nccl";
      return;
    }
    // The per-block barrier pairs block b of every rank: every rank launches the same grid.
    group_cap = std::min(group_cap, std::stoi(v.substr(bar + 1)));
  }

  // 4. Buffers. Everything below that can fail locally is caught, so that every rank still
  // takes part in the all_gathers and all ranks agree on the verdict.
  alloc_bytes_ = allreduce_allocation_bytes(buffer_bytes_);
  std::string local_problem;
  cudaIpcMemHandle_t handle{};
  try {
    TPB_CUDA_CHECK(cudaMalloc(&local_alloc_, alloc_bytes_));
    TPB_CUDA_CHECK(cudaMemset(local_alloc_, 0, alloc_bytes_));
    // The read self-test's pattern at the start of this rank's data buffer.
    std::vector<std::uint32_t> pattern(std::min(kSelftestReadBytes, buffer_bytes_) / 4);
    for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = selftest_word(rank_, i);
    TPB_CUDA_CHECK(cudaMemcpy(static_cast<char*>(local_alloc_) + sizeof(AllreduceSignal), pattern.data(),
                              pattern.size() * 4, cudaMemcpyHostToDevice));
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    TPB_CUDA_CHECK(cudaIpcGetMemHandle(&handle, local_alloc_));
  } catch (const Error& e) {
    local_problem = std::string("IPC export failed: ") + e.what();
  }
  std::string mine(reinterpret_cast<const char*>(&handle), sizeof handle);
  mine += local_problem.empty() ? '1' : '0';
  const std::vector<std::string> handles = bootstrap.all_gather(mine);
  std::vector<std::string> visible;  // UUIDs of the GPUs this rank sees, by ordinal (filled on need)
  for (int r = 0; r < size_ && local_problem.empty(); ++r) {
    const std::string& h = handles[static_cast<std::size_t>(r)];
    if (h.size() != sizeof handle + 1 || h[sizeof handle] != '1') {
      local_problem = "rank " + std::to_string(r) + " could not export its buffer";
      break;
    }
    if (r == rank_) {
      launch_.signals[r] = static_cast<AllreduceSignal*>(local_alloc_);
      continue;
    }
    // A peer on this same GPU (shared placement) needs no peer access: its buffer opens
    // through IPC as a local allocation. The self-test below still proves the mapping.
    int peer_device = -1;
    const bool same_gpu = uuids[static_cast<std::size_t>(r)] == uuids[static_cast<std::size_t>(rank_)];
    if (!same_gpu) {
      if (visible.empty()) {  // this rank's CUDA ordinals by UUID, read once for all peers
        int count = 0;
        TPB_CUDA_CHECK(cudaGetDeviceCount(&count));
        for (int d = 0; d < count; ++d) visible.push_back(device_uuid(d));
      }
      const auto found = std::find(visible.begin(), visible.end(), uuids[static_cast<std::size_t>(r)]);
      if (found != visible.end()) peer_device = static_cast<int>(found - visible.begin());
      int can = 0;
      if (peer_device < 0 || cudaDeviceCanAccessPeer(&can, device_, peer_device) != cudaSuccess || !can) {
        (void)cudaGetLastError();
        local_problem = "no peer access from GPU " + uuids[static_cast<std::size_t>(rank_)] + " to GPU " +
                        uuids[static_cast<std::size_t>(r)] + (peer_device < 0 ? " (not visible to this rank)" : "");
        break;
      }
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
  // Everyone has opened (or failed to open) the handles before anyone touches them.
  bootstrap.barrier();
  if (local_problem.empty()) local_problem = peer_access_problem(bootstrap);
  else bootstrap.barrier();  // peer_access_problem's one barrier, so that the counts match
  const std::vector<std::string> verdicts = bootstrap.all_gather(local_problem);
  for (int r = 0; r < size_; ++r) {
    if (!verdicts[static_cast<std::size_t>(r)].empty()) {
      unavailable_reason_ = "rank " + std::to_string(r) + ": " + verdicts[static_cast<std::size_t>(r)] + ": using nccl";
      // No kernel ran on these buffers: close the peers', meet them, free ours.
      release_ipc([&] { bootstrap.barrier(); });
      return;
    }
  }

  TPB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&report_), sizeof(AllreduceErrorReport), cudaHostAllocMapped));
  *report_ = AllreduceErrorReport{};
  AllreduceErrorReport* device_report = nullptr;
  TPB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_report), report_, 0));
  launch_.rank = rank_;
  launch_.world = size_;
  for (int r = 0; r < size_; ++r)
    launch_.buffers[r] = reinterpret_cast<char*>(launch_.signals[r]) + sizeof(AllreduceSignal);
  launch_.buffer_bytes = buffer_bytes_;
  launch_.report = device_report;
  launch_.timeout_ns = static_cast<std::uint64_t>(options.timeout_s * 1e9);
  launch_.max_blocks = group_cap;
  custom_ok_ = true;
  bootstrap.barrier();  // nobody launches a kernel before every rank is ready
}

std::string CustomAllreduceCommunicator::peer_access_problem(Bootstrap& bootstrap) {
  std::string problem;
  // Write half: a token into every peer's signal through the mapping. Read half: every rank's
  // data buffer pattern through the mapping, into local memory.
  const std::size_t read_bytes = std::min(kSelftestReadBytes, buffer_bytes_);
  void* read_back = nullptr;
  try {
    void* buffers[kAllreduceMaxRanks] = {};
    for (int r = 0; r < size_; ++r) buffers[r] = reinterpret_cast<char*>(launch_.signals[r]) + sizeof(AllreduceSignal);
    TPB_CUDA_CHECK(cudaMalloc(&read_back, read_bytes * static_cast<std::size_t>(size_)));
    launch_allreduce_selftest(launch_.signals, rank_, size_, selftest_token(rank_), nullptr);
    launch_allreduce_selftest_read(buffers, size_, read_bytes, read_back, nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint32_t> got(read_bytes / 4 * static_cast<std::size_t>(size_));
    TPB_CUDA_CHECK(cudaMemcpy(got.data(), read_back, got.size() * 4, cudaMemcpyDeviceToHost));
    for (int r = 0; r < size_ && problem.empty(); ++r)
      for (std::size_t i = 0; i < read_bytes / 4; ++i) {
        const std::uint32_t v = got[static_cast<std::size_t>(r) * (read_bytes / 4) + i];
        if (v == selftest_word(r, i)) continue;
        std::ostringstream os;
        os << "peer-access self-test: reading rank " << r << "'s buffer through its mapping gave 0x" << std::hex << v
           << " at word " << std::dec << i << ", rank " << r << " wrote 0x" << std::hex << selftest_word(r, i);
        problem = os.str();
        break;
      }
  } catch (const Error& e) {
    problem = std::string("peer-access self-test failed: ") + e.what();
  }
  if (read_back != nullptr) (void)cudaFree(read_back);
  bootstrap.barrier();  // all writes are done (each rank synchronized its device) before reading
  if (problem.empty()) {
    AllreduceSignal probe;
    TPB_CUDA_CHECK(cudaMemcpy(&probe, local_alloc_, sizeof probe, cudaMemcpyDeviceToHost));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || probe.selftest[r] == selftest_token(r)) continue;
      std::ostringstream os;
      os << "peer-access self-test: rank " << r << " wrote 0x" << std::hex << selftest_token(r) << " through its "
         << "mapping but this rank read 0x" << probe.selftest[r];
      problem = os.str();
      break;
    }
  }
  return problem;
}

template <typename Meet>
void CustomAllreduceCommunicator::release_ipc(Meet&& meet) {
  for (int r = 0; r < kAllreduceMaxRanks; ++r) {
    if (peer_alloc_[r] != nullptr) (void)cudaIpcCloseMemHandle(peer_alloc_[r]);
    peer_alloc_[r] = nullptr;
  }
  meet();  // no peer maps this rank's buffer any more
  if (local_alloc_ != nullptr) (void)cudaFree(local_alloc_);
  local_alloc_ = nullptr;
  alloc_bytes_ = 0;
  custom_ok_ = false;
}

CustomAllreduceCommunicator::~CustomAllreduceCommunicator() {
  (void)cudaSetDevice(device_);
  (void)cudaDeviceSynchronize();  // this rank's kernels are done (their spin-waits are bounded)
  if (custom_ok_) {
    // A barrier that fails (a peer died, or it timed out) still lets teardown go on: a dead
    // peer reads nothing, and a hung one gives up at its own timeout.
    const auto meet = [this](const char* why) {
#if TPB_HAVE_NCCL
      try {
        nccl_->barrier();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tpbench: custom allreduce rank %d teardown, %s: %s\n", rank_, why, e.what());
      }
#else
      (void)why;
#endif
    };
    // Every peer's last call has finished reading this rank's buffer.
    meet("waiting for the peers' last calls");
    // A captured graph still holds launches on these buffers. Its instance may be released
    // a moment after it was destroyed (CUDA runs user-object destructors on its own thread).
    for (int waited_ms = 0; graphs_->live_graph_refs.load() > 0 && waited_ms < 1000; ++waited_ms)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (const int live = graphs_->live_graph_refs.load(); live > 0) {
      std::fprintf(stderr,
                   "tpbench: custom allreduce rank %d destroyed while %d captured call(s) of live CUDA graphs "
                   "use its buffers: they stay allocated (destroy the graphs first)\n",
                   rank_, live);
      meet("no peer frees under its graphs");
      report_ = nullptr;  // the graphs' launches write into it
    } else {
      release_ipc([&] { meet("waiting for the peers to close their mappings"); });
    }
  }
  if (report_ != nullptr) (void)cudaFreeHost(report_);
  drop_ledger_ref(graphs_);
}

std::string CustomAllreduceCommunicator::name() const {
  if (!custom_ok_) return "nccl";
  return algo_ == AllreduceAlgo::one_shot ? "custom-oneshot" : "custom-twoshot";
}

std::size_t CustomAllreduceCommunicator::memory_bytes() const {
  std::size_t nccl_bytes = 0;
#if TPB_HAVE_NCCL
  if (owned_nccl_) nccl_bytes = owned_nccl_->memory_bytes();
#endif
  return alloc_bytes_ + nccl_bytes;
}

bool CustomAllreduceCommunicator::custom_path_for(std::size_t bytes) const {
  return custom_ok_ && (bytes + 15) / 16 * 16 <= buffer_bytes_;
}

void CustomAllreduceCommunicator::check_errors() const {
  if (report_ == nullptr) return;
  const volatile AllreduceErrorReport* r = report_;
  const int code = r->code;
  if (code == 0) return;
  const AllreduceCallTag mine{r->mine.call, r->mine.shape, r->mine.bytes};
  const AllreduceCallTag theirs{r->theirs.call, r->theirs.shape, r->theirs.bytes};
  std::ostringstream os;
  os << "custom allreduce rank " << rank_ << " (GPU " << device_ << "): " << allreduce_error_text(code) << ": ";
  if (code == kAllreduceErrorTimeout)
    os << "rank " << r->peer << " did not arrive within " << timeout_s_ << " s at this rank's " << tag_text(mine);
  else if (code == kAllreduceErrorMismatch)
    os << "this rank was at " << tag_text(mine) << ", rank " << r->peer << " at " << tag_text(theirs);
  else
    os << "at this rank's " << tag_text(mine);
  os << "; that call's output is NaN and every later call's too, until recover() (collective)";
  TPB_FAIL(os.str());
}

void CustomAllreduceCommunicator::recover() {
  if (!custom_ok_) return;
  TPB_CUDA_CHECK(cudaSetDevice(device_));
  TPB_CUDA_CHECK(cudaDeviceSynchronize());  // this rank's kernels ended (bounded spins)
#if TPB_HAVE_NCCL
  nccl_->barrier();  // and every peer's: nobody writes into a signal any more
#endif
  TPB_CUDA_CHECK(cudaMemset(local_alloc_, 0, sizeof(AllreduceSignal)));
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  *report_ = AllreduceErrorReport{};
#if TPB_HAVE_NCCL
  nccl_->barrier();  // every signal is zero before anyone launches again
#endif
}

void CustomAllreduceCommunicator::set_test_delay(AllreduceDelayAt at, std::uint64_t ns) {
  launch_.delay_at = at;
  launch_.delay_ns = ns;
}

void CustomAllreduceCommunicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype,
                                             void* stream) {
  all_reduce_with(algo_, in, out, count, dtype, stream);
}

void CustomAllreduceCommunicator::note_capture(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  TPB_CUDA_CHECK(cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, nullptr, &graph));
  if (status != cudaStreamCaptureStatusActive || graph == nullptr) return;
  cudaUserObject_t object;
  graphs_->live_graph_refs.fetch_add(1);
  graphs_->holders.fetch_add(1);
  TPB_CUDA_CHECK(cudaUserObjectCreate(&object, graphs_, graph_released, 1, cudaUserObjectNoDestructorSync));
  TPB_CUDA_CHECK(cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove));
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
  note_capture(stream);
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
  // it fails, a failed custom call is the likelier root cause: report that first.
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
