// For subcommands whose --json output follows human lines (run, qualify): while one of these
// lives, whatever is written to stdout, by this process or the processes it starts (ranks,
// the report script), goes to stderr, so that stdout carries the JSON and nothing else.
// Done on the file descriptor, not on std::cout, for the children's sake.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tpb/check.h"

namespace tpb::cli {

class HumanLinesToStderr {
 public:
  explicit HumanLinesToStderr(bool active) {
    if (!active) return;
    std::fflush(stdout);
    saved_stdout_ = ::dup(STDOUT_FILENO);
    TPB_CHECK(saved_stdout_ >= 0 && ::dup2(STDERR_FILENO, STDOUT_FILENO) >= 0,
              "--json: cannot point stdout at stderr: " << std::strerror(errno));
  }
  HumanLinesToStderr(const HumanLinesToStderr&) = delete;
  HumanLinesToStderr& operator=(const HumanLinesToStderr&) = delete;
  ~HumanLinesToStderr() { restore(); }

  // Puts stdout back, for the JSON.
  void restore() {
    if (saved_stdout_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_stdout_, STDOUT_FILENO);
    ::close(saved_stdout_);
    saved_stdout_ = -1;
  }

 private:
  int saved_stdout_ = -1;  // the real stdout while redirected; -1 when not
};

}  // namespace tpb::cli
