// The machine's member of the tpb/check.h family: a failed system call on a resource the user
// owns (a full or read-only disk, a folder that cannot be created, a file that cannot be
// written, no process left to fork). That is neither bad input (exit 2) nor a bug in tpbench:
// it throws tpb::Error (the CLI prints "failed", exit 1) with the message alone, which names the
// file and the errno. TPB_CHECK's "[statement at file:line]" is for our invariants; here it
// would only tell the user where in our source their disk filled up.
//
//   TPB_SYSTEM_CHECK(fd >= 0, path << ": cannot create: " << std::strerror(errno));
#pragma once

#include <sstream>
#include <string>

#include "tpb/check.h"

namespace tpb {

// Throws Error(message), nothing added.
[[noreturn]] void throw_system_error(const std::string& message);

}  // namespace tpb

#define TPB_SYSTEM_FAIL(msg)                          \
  do {                                                \
    std::ostringstream tpb_system_os_;                \
    tpb_system_os_ << msg;                            \
    ::tpb::throw_system_error(tpb_system_os_.str());  \
  } while (0)

#define TPB_SYSTEM_CHECK(cond, msg)    \
  do {                                 \
    if (!(cond)) TPB_SYSTEM_FAIL(msg); \
  } while (0)
