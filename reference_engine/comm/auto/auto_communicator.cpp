// AutoCommunicator (see auto_communicator.h).
#include "reference_engine/comm/auto/auto_communicator.h"

#include "reference_engine/comm/agreement.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "reference_engine/config/data_home.h"
#include "reference_engine/config/json_text.h"
#include "tpb/check.h"
#include "tpb/kernels/device.h"

#if TPB_HAVE_NCCL
#include "reference_engine/comm/nccl/nccl_communicator.h"
#endif

namespace tpb {

std::string default_allreduce_thresholds_path() {
  if (const char* env = std::getenv("TPB_ALLREDUCE_THRESHOLDS"); env != nullptr && *env != '\0') return env;
  // The first data root that holds it ($TPB_HOME, the install prefix, the source tree), else
  // the source tree's path, which the "no calibration file" note then names.
  const std::filesystem::path file = std::filesystem::path("baselines") / "h200x2" / "allreduce_thresholds.json";
  std::error_code ec;
  for (const auto& root : data_roots())
    if (std::filesystem::is_regular_file(std::filesystem::path(root) / file, ec)) return (std::filesystem::path(root) / file).string();
  // This file is reference_engine/comm/auto/auto_communicator.cpp in the source tree.
  const std::filesystem::path root = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
  return (root / file).string();
}

AllreduceThresholds load_allreduce_thresholds(const std::string& path, const std::string& gpu_name, int world) {
  AllreduceThresholds t;
  std::ifstream f(path);
  if (!f) {
    t.source = "no calibration file " + path;
    return t;
  }
  const nlohmann::json j = read_json_text_file(path);  // strict and bounded: a problem names the file, line and column
  auto need = [&](const char* key) -> const nlohmann::json& {
    TPB_INPUT_CHECK(j.contains(key), path << ": missing field /" << key);
    return j.at(key);
  };
  TPB_INPUT_CHECK(need("schema") == "tpb.allreduce_thresholds.v1",
                  path << ": /schema must be \"tpb.allreduce_thresholds.v1\"");
  const auto& hw = need("hardware");
  TPB_INPUT_CHECK(hw.is_object() && hw.contains("gpu") && hw["gpu"].is_string() && hw.contains("gpu_count") &&
                      hw["gpu_count"].is_number_integer(),
                  path << ": /hardware must be an object with string gpu and integer gpu_count");
  const std::string file_gpu = hw["gpu"].get<std::string>();
  const int file_world = need("world_size").get<int>();
  if (file_gpu != gpu_name || file_world != world) {
    t.source = path + " was measured on " + std::to_string(file_world) + " x " + file_gpu + ", not " +
               std::to_string(world) + " x " + gpu_name;
    return t;
  }
  const auto& one = need("oneshot_max_bytes");
  const auto& two = need("twoshot_max_bytes");
  TPB_INPUT_CHECK(one.is_number_unsigned() && two.is_number_unsigned() && one.get<std::size_t>() <= two.get<std::size_t>(),
                  path << ": /oneshot_max_bytes and /twoshot_max_bytes must be non-negative integers, oneshot <= twoshot");
  t.oneshot_max_bytes = one.get<std::size_t>();
  t.twoshot_max_bytes = two.get<std::size_t>();
  t.source = path;
  return t;
}

static std::string gpu_name_of(int device) {
  for (const GpuInfo& g : visible_gpus())
    if (g.ordinal == device) return g.name;
  return "unknown GPU";
}

AutoCommunicator::AutoCommunicator(Bootstrap& bootstrap, const CommOptions& options)
    : custom_(AllreduceAlgo::two_shot, bootstrap, options),
      thresholds_(load_allreduce_thresholds(default_allreduce_thresholds_path(), gpu_name_of(options.device),
                                            bootstrap.size())) {
  // Each rank reads its own file (TPB_ALLREDUCE_THRESHOLDS, its GPU's name): one rank on
  // one-shot and another on two-shot for the same message would pair their barriers wrongly.
  require_agreement(bootstrap, "auto allreduce thresholds (one-shot max, two-shot max bytes)",
                    std::to_string(thresholds_.oneshot_max_bytes) + ", " + std::to_string(thresholds_.twoshot_max_bytes));
}

std::string AutoCommunicator::choice_for(std::size_t bytes) const {
  if (!custom_.custom_path_for(bytes)) return "nccl";
  if (bytes <= thresholds_.oneshot_max_bytes) return "custom-oneshot";
  if (bytes <= thresholds_.twoshot_max_bytes) return "custom-twoshot";
  return "nccl";
}

std::string AutoCommunicator::fallback_reason() const {
  std::string why;
  if (thresholds_.twoshot_max_bytes == 0)
    why = "no measured thresholds (" + thresholds_.source + "): nccl for every size";
  else
    why = "thresholds from " + thresholds_.source + ": one-shot <= " + std::to_string(thresholds_.oneshot_max_bytes) +
          " B, two-shot <= " + std::to_string(thresholds_.twoshot_max_bytes) + " B, nccl above";
  if (!custom_.custom_available()) why += "; custom path off: " + custom_.fallback_reason();
  return why;
}

void AutoCommunicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) {
  const std::size_t bytes = count * dtype_size(dtype);
  const std::string choice = choice_for(bytes);
  if (choice == "custom-oneshot")
    custom_.all_reduce_with(AllreduceAlgo::one_shot, in, out, count, dtype, stream);
  else if (choice == "custom-twoshot")
    custom_.all_reduce_with(AllreduceAlgo::two_shot, in, out, count, dtype, stream);
  else
#if TPB_HAVE_NCCL
    custom_.nccl().all_reduce(in, out, count, dtype, stream);
#else
    TPB_FAIL("auto: NCCL is not in this build");
#endif
}

void AutoCommunicator::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) {
  custom_.all_gather(in, out, count_per_rank, dtype, stream);
}

}  // namespace tpb
