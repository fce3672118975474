// device_uuid and gpus_nvlink_connected (tpb/kernels/device.h): the identity of a GPU that
// every process agrees on whatever its CUDA_VISIBLE_DEVICES, and the NVLink between two of
// them as the driver reports it (NVML's P2P status, NVLink index: the query nvidia-smi topo
// -p2p n answers).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "nvml_library.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/device.h"

namespace tpb {

std::string device_uuid(int device) {
  cudaDeviceProp prop{};
  TPB_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

int gpus_nvlink_connected(const std::string& uuid_a, const std::string& uuid_b, std::string* why) {
  const Nvml& n = nvml();
  const auto fail = [&](const std::string& text) {
    if (why != nullptr) *why = text;
    return -1;
  };
  if (!n.problem.empty()) return fail(n.problem);
  if (n.handle_by_uuid == nullptr || n.p2p_status == nullptr)
    return fail("libnvidia-ml.so.1 lacks nvmlDeviceGetHandleByUUID / nvmlDeviceGetP2PStatus");
  void* a = nullptr;
  void* b = nullptr;
  if (n.handle_by_uuid(uuid_a.c_str(), &a) != 0) return fail("NVML does not know GPU " + uuid_a);
  if (n.handle_by_uuid(uuid_b.c_str(), &b) != 0) return fail("NVML does not know GPU " + uuid_b);
  int status = -1;
  if (const int rc = n.p2p_status(a, b, kNvmlP2PCapsIndexNvlink, &status); rc != 0)
    return fail("nvmlDeviceGetP2PStatus (NVLink) returned " + std::to_string(rc));
  return status == kNvmlP2PStatusOk ? 1 : 0;
}

}  // namespace tpb
