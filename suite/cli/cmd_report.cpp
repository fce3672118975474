// tpbench report: plots, report.html and summary.md for a results folder.
//
// The work is done by report/make_report.py (Python 3 + matplotlib); this file finds the
// script and an interpreter, runs it with fork/exec (no shell, so folder names need no
// quoting) and passes its exit status on. Exec failure is reported through a close-on-exec
// pipe, so "python3 is not installed" is told apart from the script exiting 127 itself.
#include "suite/cli/report.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "reference_engine/config/data_home.h"
#include "suite/cli/subcommand.h"
#include "tpb/check.h"

namespace fs = std::filesystem;

namespace tpb::cli {

std::string find_report_script(std::vector<std::string>* searched) {
  std::vector<fs::path> roots;
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec) roots.push_back(cwd);
  for (const auto& root : tpb::data_roots()) roots.emplace_back(root);  // $TPB_HOME, install prefix, source tree
  for (const auto& root : roots) {
    const fs::path script = root / "report" / "make_report.py";
    if (searched) searched->push_back((root / "report").string());
    if (fs::is_regular_file(script, ec)) return fs::absolute(script, ec).string();
  }
  return "";
}

int run_report_script(const std::vector<std::string>& args) {
  std::vector<std::string> searched;
  const std::string script = find_report_script(&searched);
  if (script.empty()) {
    std::string where;
    for (const auto& s : searched) where += (where.empty() ? "" : ", ") + s;
    std::fprintf(stderr,
                 "tpbench report: error: report/make_report.py not found (looked in %s); run "
                 "from the source tree, install tpbench (cmake --install) or set TPB_HOME to a tree holding report/\n",
                 where.c_str());
    return 2;
  }
  const char* env_python = std::getenv("TPB_PYTHON");
  const std::string python = env_python && *env_python ? env_python : "python3";

  std::vector<std::string> argv_s = {python, script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  int exec_error_pipe[2];
  if (::pipe2(exec_error_pipe, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "tpbench report: failed: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::fprintf(stderr, "tpbench report: failed: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    ::close(exec_error_pipe[0]);
    ::execvp(argv[0], argv.data());
    const int err = errno;
    (void)!::write(exec_error_pipe[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(exec_error_pipe[1]);
  int exec_errno = 0;
  ssize_t got;
  do {
    got = ::read(exec_error_pipe[0], &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  ::close(exec_error_pipe[0]);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "tpbench report: failed: waitpid: %s\n", std::strerror(errno));
      return 1;
    }
  }
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    std::fprintf(stderr,
                 "tpbench report: error: cannot run '%s' (%s); the report needs Python 3 with "
                 "matplotlib: apt-get install python3 python3-matplotlib (or set TPB_PYTHON)\n",
                 python.c_str(), std::strerror(exec_errno));
    return 2;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "tpbench report: failed: %s killed by signal %d\n", script.c_str(),
                 WTERMSIG(status));
  }
  return 1;
}

namespace {

constexpr const char* kUsage =
    "usage: tpbench report RESULTS_DIR [--out DIR] [--quiet | --verbose]\n"
    "Write plots (PNG), report.html and summary.md for a results folder (the folder of a\n"
    "`tpbench run`, holding results.jsonl and run.json), into it or into --out DIR.\n"
    "Runs report/make_report.py (found in ./report, $TPB_HOME/report, <prefix>/share/tpbench/report or the source tree)\n"
    "with $TPB_PYTHON or python3; needs matplotlib.\n"
    "  --out DIR   write the files here instead of RESULTS_DIR\n"
    "  --quiet     print nothing on success\n"
    "  --verbose   also list the sections left empty and why\n"
    "Exit status: 0 written, 2 bad input (a malformed results line names its line number)\n"
    "or python3/matplotlib missing.\n";

const Grammar kGrammar = {{{"--out", true}, {"--quiet"}, {"--verbose"}}, 1, "RESULTS_DIR"};

int run_report(const Args& args) {
  TPB_INPUT_CHECK(!args.positionals().empty(), "report: missing RESULTS_DIR (see tpbench report --help)");
  // The script's own arguments, spelled as it reads them.
  std::vector<std::string> script_args = {args.positionals().front()};
  if (auto out = args.value("--out")) script_args.insert(script_args.end(), {"--out", *out});
  for (const char* flag : {"--quiet", "--verbose"})
    if (args.has(flag)) script_args.emplace_back(flag);
  return run_report_script(script_args);
}

}  // namespace
}  // namespace tpb::cli

TPB_SUBCOMMAND("report", "Write plots, report.html and summary.md for a results folder", tpb::cli::kUsage,
               tpb::cli::kGrammar, tpb::cli::run_report);
