// tpbench mps: start, query and stop a CUDA MPS control daemon at a pipe folder of the
// caller's choosing, and reap the daemons of dead tpbench runs (suite/launch/mps.h).
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
#include "suite/launch/mps.h"
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

struct MpsArgs {
  std::string action;      // start | stop | status | reap
  std::string pipe_dir;    // --pipe-dir
  std::string log_dir;     // --log-dir (start)
  std::string state_root;  // --state-root (reap); empty: MpsOptions' default
  bool require = false;    // --require (start)
};

const tpb::cli::Grammar kGrammar = {
    {{"--pipe-dir", true}, {"--log-dir", true}, {"--require"}, {"--state-root", true}}, 1, "action"};

// Which action takes which option: the grammar declares them all, this says where each applies.
bool option_applies(const std::string& option, const std::string& action) {
  if (option == "--pipe-dir") return action != "reap";
  if (option == "--log-dir" || option == "--require") return action == "start";
  return action == "reap";  // --state-root
}

MpsArgs read_args(const tpb::cli::Args& given) {
  MpsArgs a;
  TPB_INPUT_CHECK(!given.positionals().empty(), "mps: needs an action: start, stop, status or reap (see tpbench mps --help)");
  a.action = given.positionals().front();
  TPB_INPUT_CHECK(a.action == "start" || a.action == "stop" || a.action == "status" || a.action == "reap",
                  "mps: unknown action '" << a.action << "' (start, stop, status or reap)");
  for (const char* option : {"--pipe-dir", "--log-dir", "--require", "--state-root"})
    TPB_INPUT_CHECK(!given.has(option) || option_applies(option, a.action),
                    "mps: " << option << " does not apply to " << a.action << " (see tpbench mps --help)");
  a.pipe_dir = given.value_or("--pipe-dir", "");
  a.log_dir = given.value_or("--log-dir", "");
  a.state_root = given.value_or("--state-root", "");
  a.require = given.has("--require");
  TPB_INPUT_CHECK(a.action == "reap" || !a.pipe_dir.empty(), "mps: " << a.action << " needs --pipe-dir DIR");
  return a;
}

int run_mps(const tpb::cli::Args& given) {
  const MpsArgs args = read_args(given);
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

TPB_SUBCOMMAND("mps", "Start, stop or query a CUDA MPS daemon (GPU test fixtures, scripts)", kUsage, kGrammar, run_mps);
