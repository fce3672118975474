// One family of error checks for all of tpbench. Library code throws; the CLI catches,
// prints one line and exits with a status (2 for bad input, 1 for a failed run).
//
//   TPB_CHECK(cond, msg)        internal invariant or runtime failure  -> tpb::Error
//   TPB_INPUT_CHECK(cond, msg)  bad user input (file, flag, field)     -> tpb::InputError
//   TPB_CUDA_CHECK(expr)        in tpb/cuda_check.h (CUDA builds only)
//   TPB_NCCL_CHECK(expr)        in tpb/cuda_check.h (NCCL builds only)
//
// `msg` is a stream expression: TPB_CHECK(n > 0, "n = " << n << " must be positive").
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tpb {

// A failure while running: a bad state, a failed system call, a peer that never arrived.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user: a scenario field, a flag, a missing file. Exit status 2.
class InputError : public Error {
 public:
  using Error::Error;
};

// Builds "<msg> [<statement> at <file>:<line>]" and throws E. The one reporting function.
[[noreturn]] void throw_error(bool input_error, const char* statement, const char* file, int line,
                              const std::string& message);

}  // namespace tpb

#define TPB_DETAIL_FAIL(input, stmt, msg)                                       \
  do {                                                                          \
    std::ostringstream tpb_detail_os_;                                          \
    tpb_detail_os_ << msg;                                                      \
    ::tpb::throw_error(input, stmt, __FILE__, __LINE__, tpb_detail_os_.str());  \
  } while (0)

#define TPB_CHECK(cond, msg)                  \
  do {                                        \
    if (!(cond)) TPB_DETAIL_FAIL(false, #cond, msg); \
  } while (0)

#define TPB_INPUT_CHECK(cond, msg)            \
  do {                                        \
    if (!(cond)) TPB_DETAIL_FAIL(true, #cond, msg); \
  } while (0)

#define TPB_FAIL(msg) TPB_DETAIL_FAIL(false, "", msg)
#define TPB_INPUT_FAIL(msg) TPB_DETAIL_FAIL(true, "", msg)
