#include "reference_engine/comm/factory.h"

#include <cstdlib>

#include "reference_engine/comm/shm/shm_communicator.h"
#if TPB_HAVE_CUDA && TPB_HAVE_NCCL
#include "reference_engine/comm/auto/auto_communicator.h"
#include "reference_engine/comm/custom/custom_communicator.h"
#include "reference_engine/comm/nccl/nccl_communicator.h"
#endif
#include "tpb/check.h"

namespace tpb {

namespace {

// TEST-ONLY planted fault, TPB_TEST_PLANT_FALLBACK=1: the CPU stand-in for a custom allreduce
// that silently became NCCL (no peer access). "mpi", a CPU backend this build does not have,
// is then offered, and asking for it gives shm, said as the custom backend says it: name()
// "shm" and a fallback_reason. Lets the CPU tests (tests/cli/backend_fallback_is_not_custom_ok.sh,
// tests/unit/allreduce_ran_test.cpp) show what a run does with a backend that did not run.
constexpr const char* kPlantedFallbackBackend = "mpi";

bool planted_fallback_for_tests() {
  const char* v = std::getenv("TPB_TEST_PLANT_FALLBACK");
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

}  // namespace

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
  names.push_back("shm");
  if (planted_fallback_for_tests()) names.push_back(kPlantedFallbackBackend);
#if TPB_HAVE_CUDA && TPB_HAVE_NCCL
  for (const char* gpu : {"nccl", "custom-oneshot", "custom-twoshot", "auto"}) names.push_back(gpu);
#endif
  // Backends register here as they land; see make_communicator.
  return names;
}

bool is_gpu_backend(const std::string& backend) {
  return backend == "nccl" || backend == "custom-oneshot" || backend == "custom-twoshot" ||
         backend == "auto";
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend, Bootstrap& bootstrap,
                                                const CommOptions& options) {
  if (backend == "shm") return std::make_unique<ShmCommunicator>(bootstrap, options);
  if (backend == kPlantedFallbackBackend && planted_fallback_for_tests())
    return std::make_unique<PlantedFallbackCommunicator>(bootstrap, options);
#if TPB_HAVE_CUDA && TPB_HAVE_NCCL
  if (backend == "nccl") return std::make_unique<NcclCommunicator>(bootstrap, options);
  if (backend == "custom-oneshot")
    return std::make_unique<CustomAllreduceCommunicator>(AllreduceAlgo::one_shot, bootstrap, options);
  if (backend == "custom-twoshot")
    return std::make_unique<CustomAllreduceCommunicator>(AllreduceAlgo::two_shot, bootstrap, options);
  if (backend == "auto") return std::make_unique<AutoCommunicator>(bootstrap, options);
#endif
  TPB_INPUT_FAIL("allreduce backend '" << backend << "' is not available in this build");
}

}  // namespace tpb
