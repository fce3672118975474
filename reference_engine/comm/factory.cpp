#include "reference_engine/comm/factory.h"

#include "reference_engine/comm/shm/shm_communicator.h"
#if TPB_HAVE_CUDA && TPB_HAVE_NCCL
#include "reference_engine/comm/auto/auto_communicator.h"
#include "reference_engine/comm/custom/custom_communicator.h"
#include "reference_engine/comm/nccl/nccl_communicator.h"
#endif
#include "tpb/check.h"

namespace tpb {

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
  names.push_back("shm");
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
