#include "reference_engine/comm/factory.h"

#include <cstdlib>

#include "reference_engine/comm/shm/shm_communicator.h"
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
// that silently became NCCL (no peer access). Only then is "mpi" a row of the backend table
// (no code implements MPI, so otherwise no scenario, flag or planner accepts the name), and
// asking for it gives shm, said as the custom backend says it: name() "shm" and a
// fallback_reason. Lets the CPU tests (tests/cli/backend_fallback_is_not_custom_ok.sh,
// tests/unit/allreduce_ran_test.cpp) show what a run does with a backend that did not run.
constexpr const char* kPlantedFallbackBackend = "mpi";

bool planted_fallback_for_tests() {
  const char* v = test_hook("TPB_TEST_PLANT_FALLBACK");
  return v != nullptr && std::string(v) == "1";
}

class PlantedFallbackCommunicator final : public Communicator {
 public:
  PlantedFallbackCommunicator(Bootstrap& bootstrap, const CommOptions& options) : shm_(bootstrap, options) {}
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override {
    shm_.all_reduce(in, out, count, dtype, stream);
  }
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override {
    shm_.all_gather(in, out, count_per_rank, dtype, stream);
  }
  void barrier() override { shm_.barrier(); }
  int rank() const override { return shm_.rank(); }
  int size() const override { return shm_.size(); }
  std::string name() const override { return shm_.name(); }
  std::size_t memory_bytes() const override { return shm_.memory_bytes(); }
  std::string fallback_reason() const override {
    return std::string("planted by TPB_TEST_PLANT_FALLBACK: ") + kPlantedFallbackBackend + " unavailable, using shm";
  }
  std::vector<AllreduceCalls> allreduce_calls() const override { return shm_.allreduce_calls(); }
  void reset_allreduce_calls() override { shm_.reset_allreduce_calls(); }

 private:
  ShmCommunicator shm_;
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
  return std::make_unique<PlantedFallbackCommunicator>(bootstrap, options);
}

using enum BackendDevice;
using enum BackendBuffers;

// The table (backends.h). Host backends first, then the GPU ones in the order `tpbench list`
// prints them.
constexpr BackendInfo kBackends[] = {
    // name                   runs_on compiled_in             buffers          make                   planted
    {"shm",                   host,   true,                   none,            make_shm,              false},
    {kPlantedFallbackBackend, host,   true,                   none,            make_planted_fallback, true},
    {"nccl",                  gpu,    kGpuBackendsCompiledIn, nccl,            make_nccl,             false},
    {"custom-oneshot",        gpu,    kGpuBackendsCompiledIn, custom_and_nccl, make_custom_oneshot,   false},
    {"custom-twoshot",        gpu,    kGpuBackendsCompiledIn, custom_and_nccl, make_custom_twoshot,   false},
    {"auto",                  gpu,    kGpuBackendsCompiledIn, custom_and_nccl, make_auto,             false},
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
  return row->make(bootstrap, options);
}

}  // namespace tpb
