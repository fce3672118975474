#include "suite/records/provenance.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string_view>

#include "reference_engine/comm/host_layout.h"
#include "reference_engine/comm/mpi_session.h"
#include "suite/records/build_info.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/kernel_paths.h"
#include "tpb/test_hooks.h"

extern char** environ;

namespace tpb {

namespace {

// nvidia-smi's path when it is on PATH, else empty: without it, no topology (null).
std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  std::string_view rest(path);
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// stdout of `command`, or nullopt when it fails.
nlohmann::json command_output(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return nullptr;
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0) return nullptr;
  return out;
}

// nvidia-smi underlines the topology header with terminal escapes even into a pipe: drop
// every CSI sequence (ESC [ ... final byte) so the record holds plain text.
std::string strip_ansi(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7e)) ++i;
      continue;
    }
    out += text[i];
  }
  return out;
}

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool build_is_dirty() {
  // TPB_PRETEND_DIRTY=1 makes a clean build report a dirty tree (the CLI tests of the dirty
  // rules run on clean CI clones); it can never make a dirty build look clean.
  const char* pretend = test_hook("TPB_PRETEND_DIRTY");
  return build_info().git_dirty || (pretend && std::string_view(pretend) == "1");
}

nlohmann::json kernel_paths_json() {
  nlohmann::json ops = nlohmann::json::object();
  for (const kernels::KernelPath& path : kernels::kernel_paths())
    ops[kernels::kernel_op_name(path.op)] = {{"variant", path.variant}, {"reason", path.reason}};
  return {{"setting", kernels::kernels_setting_name(kernels::kernels_setting())}, {"ops", ops}};
}

nlohmann::json collect_host_facts() {
  const BuildInfo& b = build_info();
  nlohmann::json p;
  // The binary: a host that runs another build than its peers shows here.
  p["tpbench_version"] = b.version;
  p["git_sha"] = b.git_sha;
  p["git_dirty"] = build_is_dirty();
  p["nccl_version"] = b.nccl_version;
  p["mpi_library"] = mpi_library_version();

  p["hostname"] = this_host_name();
  struct utsname u{};
  if (::uname(&u) == 0) p["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  p["cpu_count"] = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));

  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : visible_gpus())
    gpus.push_back({{"ordinal", g.ordinal}, {"name", g.name}, {"memory_bytes", g.memory_bytes},
                    {"sm_count", g.sm_count}, {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)}});
  p["gpus"] = gpus;
  p["kernel_paths"] = kernel_paths_json();
  const std::string driver = cuda_driver_version(), runtime = cuda_runtime_version();
  p["cuda_driver"] = driver.empty() ? nlohmann::json() : nlohmann::json(driver);
  p["cuda_runtime"] = runtime.empty() ? nlohmann::json() : nlohmann::json(runtime);

  const std::string smi = find_on_path("nvidia-smi");
  nlohmann::json topology = smi.empty() ? nlohmann::json() : command_output(smi + " topo -m 2>/dev/null");
  if (topology.is_string()) topology = strip_ansi(topology.get<std::string>());
  p["topology"] = topology;
  // One line per GPU, all the same driver: keep the first.
  nlohmann::json driver_lines =
      smi.empty() ? nlohmann::json() : command_output(smi + " --query-gpu=driver_version --format=csv,noheader 2>/dev/null");
  if (driver_lines.is_string()) {
    const std::string all = driver_lines.get<std::string>();
    driver_lines = all.substr(0, all.find('\n'));
  }
  p["nvidia_driver"] = driver_lines;

  // TPB_PROGRAMMATIC_LAUNCH=0 turns off the kernels' programmatic dependent launch, which moves
  // latency, and TPB_KERNELS=portable the wgmma kernels: a record says so.
  p["env"] = environment_with_prefixes({"NCCL_", "CUDA_", "TPB_PROGRAMMATIC_LAUNCH", "TPB_KERNELS"});
  return p;
}

nlohmann::json collect_provenance(const std::string& start_time_utc) {
  const BuildInfo& b = build_info();
  nlohmann::json p = collect_host_facts();
  p.update({{"build_type", b.build_type},
            {"compiler", b.cxx_compiler},
            {"cxx_flags", b.cxx_flags},
            {"cuda_compiler", b.cuda_compiler},
            {"cuda_flags", b.cuda_flags},
            {"cuda_architectures", b.cuda_architectures},
            {"have_cuda", b.have_cuda},
            {"have_nccl", b.have_nccl},
            {"have_mpi", mpi_compiled_in()},
            {"start_time", start_time_utc}});
  return p;
}

nlohmann::json environment_with_prefixes(const std::vector<std::string>& prefixes) {
  nlohmann::json env = nlohmann::json::object();
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    if (std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return kv.starts_with(p); })) continue;
    const auto eq = kv.find('=');
    env[std::string(kv.substr(0, eq))] = eq == std::string_view::npos ? "" : std::string(kv.substr(eq + 1));
  }
  return env;
}

nlohmann::json reproducibility_environment() { return environment_with_prefixes({"TPB_", "NCCL_", "CUDA_"}); }

nlohmann::json compact_provenance(const nlohmann::json& full) {
  nlohmann::json c;
  for (const char* key : {"git_sha", "git_dirty", "tpbench_version", "build_type", "compiler", "cxx_flags",
                          "have_cuda", "cuda_compiler", "cuda_flags", "cuda_architectures", "hostname",
                          "start_time", "cuda_driver", "cuda_runtime", "nccl_version", "topology", "kernel_paths"})
    c[key] = full.contains(key) ? full[key] : nlohmann::json();
  nlohmann::json names = nlohmann::json::array();
  for (const auto& g : full.value("gpus", nlohmann::json::array())) names.push_back(g.value("name", ""));
  c["gpus"] = names;
  c["full"] = "run.json";  // where the rest is
  return c;
}

}  // namespace tpb
