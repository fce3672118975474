// Makes a Communicator by backend name, through the backend table (backends.h). Backends
// that are not compiled in (no CUDA, no NCCL) are an InputError naming what is missing,
// never a silent substitute.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "reference_engine/comm/backends.h"
#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"

namespace tpb {

struct CommOptions {
  int device = -1;                           // CUDA device ordinal for GPU backends; -1 for CPU
  std::size_t max_bytes = 8u << 20;          // largest message a custom backend must handle, bytes
  double timeout_s = 60.0;                   // a peer that does not arrive within this fails the call
  bool custom_on_pcie = false;               // run the custom allreduce on more than two GPUs that
                                             // no NVLink joins (off by default, as in vLLM and
                                             // SGLang: custom_communicator.h)
};

// `backend` is a name in the backend table (backends.h).
std::unique_ptr<Communicator> make_communicator(const std::string& backend, Bootstrap& bootstrap,
                                                const CommOptions& options);

}  // namespace tpb
