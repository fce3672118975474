// Provenance: what produced a result — the build (version, git sha, dirty flag, build type,
// compilers, flags, CUDA architectures, NCCL version from suite/records/build_info.h) and the machine at run time (hostname, start
// time, GPUs, the kernel path each GPU op takes there, driver and runtime versions,
// `nvidia-smi topo -m`, every NCCL_* and CUDA_* variable). A baseline is only comparable
// with results of the same fingerprint.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

// The facts of the machine this process runs on and of its binary: hostname, os, cpu_count,
// gpus, kernel_paths, cuda_driver, cuda_runtime, nvidia_driver, topology, env (every NCCL_*
// and CUDA_* variable, TPB_PROGRAMMATIC_LAUNCH, TPB_KERNELS), and tpbench_version, git_sha,
// git_dirty, nccl_version, mpi_library. The controller's provenance holds them for its own
// machine; each host's reporting rank sends them for its host (suite/launch/host_facts.h, run.json
// provenance.hosts).
nlohmann::json collect_host_facts();
// The kernel path of every registered GPU op on this process's current device (its first
// visible GPU, in the controller and in a host's reporting rank; tpb/kernels/kernel_paths.h):
// {"setting": TPB_KERNELS as parsed ("auto" or "portable"), "ops": {op: {"variant", "reason"}}}.
// A malformed TPB_KERNELS throws tpb::InputError.
nlohmann::json kernel_paths_json();
// The full record, for run.json: collect_host_facts() plus the rest of the build and the start. `start_time_utc` is ISO 8601 ("2026-11-30T22:48:36Z").
nlohmann::json collect_provenance(const std::string& start_time_utc);
// The part repeated in every results record: enough to tell builds and machines apart.
nlohmann::json compact_provenance(const nlohmann::json& full);
// The variables of this process's environment whose names start with one of `prefixes`,
// name -> value (e.g. {"TPB_", "NCCL_", "CUDA_"}: CUDA_VISIBLE_DEVICES included).
nlohmann::json environment_with_prefixes(const std::vector<std::string>& prefixes);
// What reruns a result needs beyond the scenario: every TPB_*, NCCL_* and CUDA_* variable
// (CUDA_VISIBLE_DEVICES, the MPS pipe, the test placement switch, TPB_HOME, ...).
nlohmann::json reproducibility_environment();
// Whether this binary was built from a dirty tree (suite/records/build_info.h), or TPB_PRETEND_DIRTY=1
// says to act as if it were (tests on clean clones).
bool build_is_dirty();
// Now, as ISO 8601 UTC.
std::string utc_now_iso8601();

}  // namespace tpb
