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

namespace {

// The message of a failed report step: the script's own line, whoever reads run.json later.
constexpr std::size_t kMaxErrorLine = 2000;

// Copies the script's stderr (`fd`) to ours until it closes, keeping its last non-empty line.
void forward_stderr(int fd, std::string& last_line) {
  std::string line;
  char chunk[4096];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    std::fwrite(chunk, 1, static_cast<std::size_t>(got), stderr);
    for (ssize_t i = 0; i < got; ++i) {
      if (chunk[i] == '\n') {
        if (!line.empty()) last_line = line;
        line.clear();
      } else if (line.size() < kMaxErrorLine) {
        line += chunk[i];
      }
    }
  }
  std::fflush(stderr);
  if (!line.empty()) last_line = line;
}

}  // namespace

int run_report_script(const std::vector<std::string>& args, std::string* last_error_line) {
  std::vector<std::string> searched;
  const std::string script = find_report_script(&searched);
  auto unavailable = [&](const std::string& why) {
    std::fprintf(stderr, "tpbench report: error: %s\n", why.c_str());
    if (last_error_line) *last_error_line = "tpbench report: error: " + why;
    return kReportUnavailable;
  };
  if (script.empty()) {
    std::string where;
    for (const auto& s : searched) where += (where.empty() ? "" : ", ") + s;
    return unavailable("report/make_report.py not found (looked in " + where +
                       "); run from the source tree, install tpbench (cmake --install) or set TPB_HOME to a tree "
                       "holding report/");
  }
  const char* env_python = std::getenv("TPB_PYTHON");
  const std::string python = env_python && *env_python ? env_python : "python3";

  std::vector<std::string> argv_s = {python, script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  int exec_error_pipe[2];
  int stderr_pipe[2] = {-1, -1};
  if (::pipe2(exec_error_pipe, O_CLOEXEC) != 0 || (last_error_line && ::pipe2(stderr_pipe, O_CLOEXEC) != 0)) {
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
    if (last_error_line) ::dup2(stderr_pipe[1], STDERR_FILENO);  // dup2 clears close-on-exec
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
  if (last_error_line) {
    ::close(stderr_pipe[1]);
    forward_stderr(stderr_pipe[0], *last_error_line);
    ::close(stderr_pipe[0]);
  }

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "tpbench report: failed: waitpid: %s\n", std::strerror(errno));
      return 1;
    }
  }
  if (got == static_cast<ssize_t>(sizeof exec_errno))
    return unavailable("cannot run '" + python + "' (" + std::strerror(exec_errno) +
                       "); the report needs Python 3 with matplotlib: apt-get install python3 python3-matplotlib (or "
                       "set TPB_PYTHON)");
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "tpbench report: failed: %s killed by signal %d\n", script.c_str(), WTERMSIG(status));
    if (last_error_line)
      *last_error_line = "tpbench report: failed: the report script was killed by signal " +
                         std::to_string(WTERMSIG(status));
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
    "Exit status: 0 written, 1 a file could not be written (a full or read-only disk; each file\n"
    "is whole or left as it was), 2 bad input (a malformed results line names its line number),\n"
    "3 python3 or matplotlib missing (nothing could be made here), 128 + the signal when interrupted.\n";

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
