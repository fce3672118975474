#include "suite/launch/launch_command.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <regex>
#include <sstream>

#include "tpb/check.h"
#include "tpb/message_text.h"

namespace tpb {
namespace {

// A non-negative decimal integer, or false.
bool parse_count(const std::string& text, long long max, int& value) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  const long long v = std::stoll(text);
  if (v > max) return false;
  value = static_cast<int>(v);
  return true;
}

// The first of `names` that is set: its name and parsed value.
struct EnvField {
  const char* label;                 // for messages: "OMPI_COMM_WORLD_RANK"
  std::vector<const char*> names;    // tried in order
  bool required;
};

}  // namespace

std::optional<LauncherKind> launcher_kind(const std::string& name) {
  for (LauncherKind k : {LauncherKind::fork, LauncherKind::mpirun, LauncherKind::srun})
    if (name == launcher_name(k)) return k;
  return std::nullopt;
}

LauncherKind parse_launcher(const std::string& name, const std::string& what) {
  const std::optional<LauncherKind> k = launcher_kind(name);
  TPB_INPUT_CHECK(k.has_value(), what << ": expected a launcher (one of fork, mpirun, srun), got '" << cut_for_message(name) << "'");
  return *k;
}

const char* launcher_name(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::fork: return "fork";
    case LauncherKind::mpirun: return "mpirun";
    case LauncherKind::srun: return "srun";
  }
  return "?";
}

std::vector<HostSlots> parse_hosts(const std::string& text, const std::string& what) {
  std::vector<HostSlots> hosts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t colon = item.find(':');
    HostSlots h;
    h.host = item.substr(0, colon);
    const bool slots_ok = colon == std::string::npos || (parse_count(item.substr(colon + 1), 1 << 16, h.slots) && h.slots > 0);
    TPB_INPUT_CHECK(!h.host.empty() && slots_ok && h.host.find_first_of(" \t'\"") == std::string::npos,
                    what << ": expected HOST[:SLOTS] items separated by commas (e.g. node1:8,node2:8), got '" << cut_for_message(item)
                         << "' in '" << cut_for_message(text) << "'");
    hosts.push_back(h);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

std::string hosts_text(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
  return out;
}

std::vector<std::string> inherited_environment(char** environ_entries, bool drop_nccl_hostid) {
  static const char* const kSetByTheLauncher[] = {
      "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "TPB_CONTROL_SOCKET=", "TPB_PROGRESS_FD=", "TPB_GROUP_ID=",
      "TPB_LAUNCHER=", "TPB_CONTROL_ADDR=", "TPB_CONTROL_TOKEN=", "TPB_RANK_LOG_DIR=", "TPB_VIRTUAL_HOSTS=",
      "TPB_DEVICE=", "TPB_RANKS_PER_GPU=", "TPB_PLACEMENT=", "TPB_HOST_ID="};
  std::vector<std::string> env;
  for (char** e = environ_entries; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto starts = [&](const char* prefix) { return entry.rfind(prefix, 0) == 0; };
    if (std::none_of(std::begin(kSetByTheLauncher), std::end(kSetByTheLauncher), starts) &&
        !(drop_nccl_hostid && starts("NCCL_HOSTID=")))
      env.push_back(entry);
  }
  return env;
}

std::string rank_log_path(const std::string& dir, const std::string& group_id, int rank) {
  return (std::filesystem::path(dir) / (group_id + "-rank" + std::to_string(rank) + ".log")).string();
}

std::vector<std::string> job_command(const JobLaunch& job) {
  TPB_CHECK(job.kind != LauncherKind::fork, "job_command: the fork launcher starts no job");
  TPB_CHECK(job.world_size >= 1 && !job.worker_binary.empty(), "job_command: no ranks or no binary");
  std::vector<std::string> argv;
  if (job.kind == LauncherKind::mpirun) {
    argv = {"mpirun", "-np", std::to_string(job.world_size)};
    if (!job.hosts.empty()) argv.insert(argv.end(), {"--host", hosts_text(job.hosts)});
    // Open MPI passes this host's environment to local ranks only; -x carries a variable to
    // every host.
    for (const auto& name : job.forwarded_env) argv.insert(argv.end(), {"-x", name});
  } else {
    argv = {"srun", "--ntasks=" + std::to_string(job.world_size), "--kill-on-bad-exit=1", "--export=ALL"};
    if (!job.hosts.empty()) {
      std::string nodes;
      for (const auto& h : job.hosts) {
        TPB_INPUT_CHECK(h.slots == job.hosts.front().slots,
                        "--launcher srun --hosts: every host needs the same slot count (srun places --ntasks-per-node "
                        "ranks on each), got " << hosts_text(job.hosts));
        nodes += (nodes.empty() ? "" : ",") + h.host;
      }
      argv.push_back("--nodelist=" + nodes);
      argv.push_back("--ntasks-per-node=" + std::to_string(job.hosts.front().slots));
    }
  }
  argv.insert(argv.end(), job.extra_args.begin(), job.extra_args.end());
  argv.insert(argv.end(), {job.worker_binary, "__worker"});
  return argv;
}

bool launched_rank(LauncherKind kind, const EnvLookup& getenv, LaunchedRank& out, std::string& error) {
  // rank, size, local rank, node: the variables each launcher sets, in the order tried.
  std::vector<EnvField> fields;
  switch (kind) {
    case LauncherKind::fork:
      fields = {{"RANK", {"RANK"}, true}, {"WORLD_SIZE", {"WORLD_SIZE"}, true}, {"LOCAL_RANK", {"LOCAL_RANK"}, true},
                {"", {}, false}};
      break;
    case LauncherKind::mpirun:
      fields = {{"OMPI_COMM_WORLD_RANK or PMI_RANK", {"OMPI_COMM_WORLD_RANK", "PMI_RANK"}, true},
                {"OMPI_COMM_WORLD_SIZE or PMI_SIZE", {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, true},
                {"OMPI_COMM_WORLD_LOCAL_RANK or MPI_LOCALRANKID", {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}, true},
                {"", {}, false}};
      break;
    case LauncherKind::srun:
      fields = {{"SLURM_PROCID", {"SLURM_PROCID"}, true}, {"SLURM_NTASKS", {"SLURM_NTASKS", "SLURM_NPROCS"}, true},
                {"SLURM_LOCALID", {"SLURM_LOCALID"}, true}, {"SLURM_NODEID", {"SLURM_NODEID"}, false}};
      break;
  }
  int values[4] = {-1, -1, -1, -1};
  std::string missing;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const char* text = nullptr;
    const char* name = nullptr;
    for (const char* n : fields[i].names)
      if ((text = getenv(n)) != nullptr) {
        name = n;
        break;
      }
    if (text == nullptr) {
      if (fields[i].required) missing += (missing.empty() ? "" : ", ") + std::string(fields[i].label);
      continue;
    }
    if (!parse_count(text, 1 << 20, values[i])) {
      error = std::string(name) + " is '" + text + "', expected a non-negative integer";
      return false;
    }
  }
  if (!missing.empty()) {
    error = std::string("the ") + launcher_name(kind) + " launcher's variables are missing: " + missing;
    return false;
  }
  out = {values[0], values[1], values[2], values[3]};
  if (out.world_size < 1 || out.rank >= out.world_size || out.local_rank > out.rank) {
    error = "rank " + std::to_string(out.rank) + ", local rank " + std::to_string(out.local_rank) + " of " +
            std::to_string(out.world_size) + " ranks does not add up";
    return false;
  }
  return true;
}

std::optional<int> rank_named_by_launcher(LauncherKind kind, const std::vector<std::string>& output_lines) {
  static const std::regex open_mpi(R"(process rank (\d+) with PID)");
  static const std::regex slurm(R"(srun: error: .*: task (\d+): )");  // not "tasks 0-3": no one rank
  const std::regex* pattern = kind == LauncherKind::mpirun ? &open_mpi : kind == LauncherKind::srun ? &slurm : nullptr;
  if (pattern == nullptr) return std::nullopt;
  for (const std::string& line : output_lines) {
    std::smatch m;
    if (std::regex_search(line, m, *pattern) && m[1].length() <= 9) return std::stoi(m[1].str());
  }
  return std::nullopt;
}

}  // namespace tpb
