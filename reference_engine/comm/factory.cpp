#include "reference_engine/comm/factory.h"

#include <cstdlib>

#include "reference_engine/comm/host_layout.h"
#include "reference_engine/comm/shm/shm_communicator.h"
#if TPB_HAVE_MPI
#include "reference_engine/comm/mpi/mpi_communicator.h"
#endif
#if TPB_HAVE_CUDA && TPB_HAVE_NCCL
#include "reference_engine/comm/auto/auto_communicator.h"
#include "reference_engine/comm/custom/custom_communicator.h"
#include "reference_engine/comm/nccl/nccl_communicator.h"
#endif
#include "tpb/check.h"
#include "tpb/test_hooks.h"

namespace tpb {

namespace {

// TEST-ONLY planted fault, TPB_TEST_PLANT_FALLBACK=1: the CPU stand-in for a custom allreduce
// that silently became NCCL (no peer access). Only then is "planted" a row of the backend
// table, and asking for it gives shm, said as the custom backend says it: name() "shm" and a
// fallback_reason. Lets the CPU tests (tests/cli/backend_fallback_is_not_custom_ok.sh,
// tests/unit/allreduce_ran_test.cpp) show what a run does with a backend that did not run.
constexpr const char* kPlantedFallbackBackend = "planted";

bool planted_fallback_for_tests() {
  const char* v = test_hook("TPB_TEST_PLANT_FALLBACK");
  return v != nullptr && std::string(v) == "1";
}

// A communicator that runs in place of the one asked for, and says why (fallback_reason):
// a custom backend in a group that spans hosts runs nccl; the planted test fault runs shm.
class RedirectedCommunicator final : public Communicator {
 public:
  RedirectedCommunicator(std::unique_ptr<Communicator> inner, std::string reason)
      : inner_(std::move(inner)), reason_(std::move(reason)) {}
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override {
    inner_->all_reduce(in, out, count, dtype, stream);
  }
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override {
    inner_->all_gather(in, out, count_per_rank, dtype, stream);
  }
  void barrier() override { inner_->barrier(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  std::size_t memory_bytes() const override { return inner_->memory_bytes(); }
  std::string fallback_reason() const override { return reason_; }
  std::vector<AllreduceCalls> allreduce_calls() const override { return inner_->allreduce_calls(); }
  void reset_allreduce_calls() override { inner_->reset_allreduce_calls(); }

 private:
  std::unique_ptr<Communicator> inner_;
  std::string reason_;
};

#if TPB_HAVE_CUDA && TPB_HAVE_NCCL
constexpr bool kGpuBackendsCompiledIn = true;
std::unique_ptr<Communicator> make_nccl(Bootstrap& bootstrap, const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(bootstrap, options);
}
std::unique_ptr<Communicator> make_custom_oneshot(Bootstrap& bootstrap, const CommOptions& options) {
  return std::make_unique<CustomAllreduceCommunicator>(AllreduceAlgo::one_shot, bootstrap, options);
}
std::unique_ptr<Communicator> make_custom_twoshot(Bootstrap& bootstrap, const CommOptions& options) {
  return std::make_unique<CustomAllreduceCommunicator>(AllreduceAlgo::two_shot, bootstrap, options);
}
std::unique_ptr<Communicator> make_auto(Bootstrap& bootstrap, const CommOptions& options) {
  return std::make_unique<AutoCommunicator>(bootstrap, options);
}
#else
constexpr bool kGpuBackendsCompiledIn = false;
constexpr MakeCommunicator make_nccl = nullptr, make_custom_oneshot = nullptr, make_custom_twoshot = nullptr,
                           make_auto = nullptr;
#endif

std::unique_ptr<Communicator> make_shm(Bootstrap& bootstrap, const CommOptions& options) {
  return std::make_unique<ShmCommunicator>(bootstrap, options);
}
std::unique_ptr<Communicator> make_planted_fallback(Bootstrap& bootstrap, const CommOptions& options) {
  return std::make_unique<RedirectedCommunicator>(
      std::make_unique<ShmCommunicator>(bootstrap, options),
      std::string("planted by TPB_TEST_PLANT_FALLBACK: ") + kPlantedFallbackBackend + " unavailable, using shm");
}
#if TPB_HAVE_MPI
constexpr bool kMpiCompiledIn = true;
std::unique_ptr<Communicator> make_mpi(Bootstrap& bootstrap, const CommOptions& options) {
  return std::make_unique<MpiCommunicator>(bootstrap, options);
}
#else
constexpr bool kMpiCompiledIn = false;
constexpr MakeCommunicator make_mpi = nullptr;
#endif

using enum BackendDevice;
using enum BackendBuffers;

// The table (backends.h). Host backends first, then the GPU ones in the order `tpbench list`
// prints them.
constexpr BackendInfo kBackends[] = {
    // name                   runs_on compiled_in             buffers          make                   across_hosts planted
    {"shm",                   host,   true,                   none,            make_shm,              nullptr,     false},
    {"mpi",                   host,   kMpiCompiledIn,         none,            make_mpi,              "mpi",       false},
    {kPlantedFallbackBackend, host,   true,                   none,            make_planted_fallback, nullptr,     true},
    {"nccl",                  gpu,    kGpuBackendsCompiledIn, nccl,            make_nccl,             "nccl",      false},
    {"custom-oneshot",        gpu,    kGpuBackendsCompiledIn, custom_and_nccl, make_custom_oneshot,   "nccl",      false},
    {"custom-twoshot",        gpu,    kGpuBackendsCompiledIn, custom_and_nccl, make_custom_twoshot,   "nccl",      false},
    {"auto",                  gpu,    kGpuBackendsCompiledIn, custom_and_nccl, make_auto,             "nccl",      false},
};

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::vector<const BackendInfo*> backend_table() {
  const bool planted = planted_fallback_for_tests();
  std::vector<const BackendInfo*> rows;
  for (const auto& row : kBackends)
    if (!row.planted_for_tests || planted) rows.push_back(&row);
  return rows;
}

const BackendInfo* find_backend(std::string_view name) {
  for (const BackendInfo* row : backend_table())
    if (name == row->name) return row;
  return nullptr;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const BackendInfo* row : backend_table()) names.push_back(row->name);
  return names;
}

std::vector<std::string> backend_names(BackendDevice device) {
  std::vector<std::string> names;
  for (const BackendInfo* row : backend_table())
    if (row->runs_on == device) names.push_back(row->name);
  return names;
}

std::string backend_list() { return join(backend_names()); }
std::string backend_list(BackendDevice device) { return join(backend_names(device)); }

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
  for (const BackendInfo* row : backend_table())
    if (row->compiled_in) names.push_back(row->name);
  return names;
}

bool is_gpu_backend(const std::string& backend) {
  const BackendInfo* row = find_backend(backend);
  return row != nullptr && row->runs_on == BackendDevice::gpu;
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend, Bootstrap& bootstrap,
                                                const CommOptions& options) {
  const BackendInfo* row = find_backend(backend);
  TPB_INPUT_CHECK(row != nullptr && row->compiled_in && row->make != nullptr,
                  "allreduce backend '" << backend << "' is not available in this build");
  if (bootstrap.size() == 1) return row->make(bootstrap, options);
  // Host-local backends never span hosts (host_layout.h): every rank learns the group's hosts.
  const BackendAcrossHosts choice = backend_across_hosts(backend, gather_host_layout(bootstrap));
  TPB_INPUT_CHECK(choice.refusal.empty(), choice.refusal);
  if (choice.fallback_reason.empty()) return row->make(bootstrap, options);
  const BackendInfo* instead = find_backend(choice.backend);
  TPB_CHECK(instead != nullptr && instead->compiled_in && instead->make != nullptr,
            backend << " across hosts needs " << choice.backend << ", which is not available in this build");
  return std::make_unique<RedirectedCommunicator>(instead->make(bootstrap, options), choice.fallback_reason);
}

}  // namespace tpb
