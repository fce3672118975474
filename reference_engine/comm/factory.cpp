#include "reference_engine/comm/factory.h"

#include "reference_engine/comm/shm/shm_communicator.h"
#include "tpb/check.h"

namespace tpb {

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
  names.push_back("shm");
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
  TPB_INPUT_FAIL("allreduce backend '" << backend << "' is not available in this build");
}

}  // namespace tpb
