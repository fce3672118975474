// nvml() (see nvml_library.h).
#include "nvml_library.h"

#include <dlfcn.h>

#include <mutex>

namespace tpb {

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      n.problem = std::string("cannot open libnvidia-ml.so.1: ") + dlerror();
      return;
    }
    using NvmlInit = int (*)();
    auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
    n.handle_by_pci = reinterpret_cast<NvmlHandleByString>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.handle_by_uuid = reinterpret_cast<NvmlHandleByString>(dlsym(lib, "nvmlDeviceGetHandleByUUID"));
    n.compute = reinterpret_cast<NvmlProcesses>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
    n.mps = reinterpret_cast<NvmlProcesses>(dlsym(lib, "nvmlDeviceGetMPSComputeRunningProcesses_v3"));
    n.p2p_status = reinterpret_cast<NvmlP2PStatus>(dlsym(lib, "nvmlDeviceGetP2PStatus"));
    if (init == nullptr || n.handle_by_pci == nullptr || n.compute == nullptr) {
      n.problem = "libnvidia-ml.so.1 lacks nvmlInit_v2 / nvmlDeviceGetHandleByPciBusId_v2 / "
                  "nvmlDeviceGetComputeRunningProcesses_v3";
      return;
    }
    if (const int rc = init(); rc != 0) n.problem = "nvmlInit_v2 returned " + std::to_string(rc);
  });
  return n;
}

}  // namespace tpb
