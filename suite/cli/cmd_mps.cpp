// tpbench mps: start, query and stop a CUDA MPS control daemon at a pipe folder of the
// caller's choosing, and reap the daemons of dead tpbench runs (suite/mps.h).
//
// `tpbench run` manages its own daemon; this subcommand is for what outlives one process: the
// ctest fixture that serves every GPU test (FIXTURES_SETUP runs `start`, FIXTURES_CLEANUP runs
// `stop`) and scripts. Each action prints one line saying what happened. Where no daemon can
// be started (no control program, no driver), `start` says so and exits 0, so that the tests
// still run (time-sliced); --require makes that exit 2.
#include <cstdio>
#include <string>
#include <vector>

#include "suite/cli/subcommand.h"
#include "suite/mps.h"
#include "tpb/check.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench mps start --pipe-dir DIR [--log-dir DIR] [--require]\n"
    "       tpbench mps stop --pipe-dir DIR\n"
    "       tpbench mps status --pipe-dir DIR\n"
    "       tpbench mps reap [--state-root DIR]\n"
    "Start, stop or query a CUDA MPS control daemon whose pipe folder is DIR (keep it short:\n"
    "Unix-socket paths are limited to 108 bytes), or stop the daemons of tpbench runs that\n"
    "died without stopping theirs (state folders DIR/tpbench-mps-<pid>, DIR default /tmp).\n"
    "  start      starts nvidia-cuda-mps-control -d (logs in --log-dir, default DIR/log) and\n"
    "             waits until it answers; exit 0 also when none can be started (no control\n"
    "             program, no driver), 2 then with --require\n"
    "  stop       sends quit, waits, and kills the daemon `start` recorded if it stays;\n"
    "             removes DIR if `start` created it; exit 1 if a daemon is left\n"
    "  status     exit 0 if a daemon answers at DIR, 1 if not\n"
    "  reap       exit 0; one line per stale daemon stopped\n"
    "Environment: TPB_MPS_CONTROL replaces nvidia-cuda-mps-control (and skips the driver check).\n";

struct Args {
  std::string action;      // start | stop | status | reap
  std::string pipe_dir;    // --pipe-dir
  std::string log_dir;     // --log-dir (start)
  std::string state_root;  // --state-root (reap); empty: MpsOptions' default
  bool require = false;    // --require (start)
};

Args parse_args(const std::vector<std::string>& args) {
  Args a;
  TPB_INPUT_CHECK(!args.empty(), "mps: needs an action: start, stop, status or reap (see tpbench mps --help)");
  a.action = args.front();
  TPB_INPUT_CHECK(a.action == "start" || a.action == "stop" || a.action == "status" || a.action == "reap",
                  "mps: unknown action '" << a.action << "' (start, stop, status or reap)");
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](const char* flag) {
      TPB_INPUT_CHECK(i + 1 < args.size(), "mps " << a.action << ": " << flag << " needs a value");
      return args[++i];
    };
    if (arg == "--pipe-dir" && a.action != "reap") a.pipe_dir = value("--pipe-dir");
    else if (arg == "--log-dir" && a.action == "start") a.log_dir = value("--log-dir");
    else if (arg == "--require" && a.action == "start") a.require = true;
    else if (arg == "--state-root" && a.action == "reap") a.state_root = value("--state-root");
    else TPB_INPUT_FAIL("mps " << a.action << ": unexpected argument '" << arg << "' (see tpbench mps --help)");
  }
  TPB_INPUT_CHECK(a.action == "reap" || !a.pipe_dir.empty(), "mps " << a.action << ": needs --pipe-dir DIR");
  return a;
}

int run_mps(const std::vector<std::string>& raw_args) {
  const Args args = parse_args(raw_args);
  tpb::MpsOptions options;
  if (!args.state_root.empty()) options.state_root = args.state_root;
  if (args.action == "reap") {
    const auto lines = tpb::reap_stale_mps(options);
    for (const auto& line : lines) std::printf("tpbench mps reap: %s\n", line.c_str());
    if (lines.empty()) std::printf("tpbench mps reap: no stale MPS daemons under %s\n", options.state_root.c_str());
    return 0;
  }
  tpb::MpsCommandResult result;
  if (args.action == "start") result = tpb::start_mps_daemon(options, args.pipe_dir, args.log_dir);
  else if (args.action == "stop") result = tpb::stop_mps_daemon(options, args.pipe_dir);
  else result = tpb::query_mps_daemon(options, args.pipe_dir);
  std::printf("tpbench mps %s: %s\n", args.action.c_str(), result.line.c_str());
  if (result.ok) return 0;
  if (args.action == "start") return args.require ? 2 : 0;
  return 1;
}

}  // namespace

TPB_SUBCOMMAND("mps", "Start, stop or query a CUDA MPS daemon (GPU test fixtures, scripts)", kUsage, run_mps);
