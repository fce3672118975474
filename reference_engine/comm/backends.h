// The allreduce backend table: one row per backend that tpbench implements, defined beside
// the constructors in factory.cpp. Everything that takes or lists a backend name reads it:
// the communicator factory builds through a row's `make`, scenario validation and the sweep
// (suite/scenario/scenario.cpp, suite/scenario/sweep.cpp) accept names and place them on host or GPU by it,
// the memory planner (memory/comm_bytes.cpp) counts a row's device buffers, and every
// message that lists backends prints its names. A backend is added or removed here alone,
// and no name is accepted that no code implements.
//
// A row exists whether or not this build compiled its code: a scenario naming a GPU backend
// stays valid on a CPU-only build and its cases are recorded skipped ("not compiled into
// this tpbench"), not rejected.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"

namespace tpb {

struct CommOptions;  // reference_engine/comm/factory.h

// Where a backend's ranks keep the buffers they reduce.
enum class BackendDevice { host, gpu };

// The device memory a backend allocates per rank, as the planner counts it (comm_bytes.h).
enum class BackendBuffers {
  none,             // host memory only
  nccl,             // NCCL's buffers
  custom_and_nccl,  // custom IPC buffers, plus the NCCL communicator the custom backends keep
};

using MakeCommunicator = std::unique_ptr<Communicator> (*)(Bootstrap& bootstrap, const CommOptions& options);

struct BackendInfo {
  const char* name;            // as scenarios, `--allreduce` and results records spell it
  BackendDevice runs_on;       // host (CPU ranks) or gpu
  bool compiled_in;            // this build has its code (the GPU backends need CUDA and NCCL)
  BackendBuffers buffers;      // device buffers per rank, for the memory planner
  MakeCommunicator make;       // this rank's communicator; null when not compiled in
  const char* across_hosts;    // what runs when the group spans hosts (host_layout.h): its own
                               // name (mpi, nccl), another row's (custom -> nccl, recorded as
                               // a fallback), or null: refused (shm)
  bool planted_for_tests;      // TEST ONLY: a row only while TPB_TEST_PLANT_FALLBACK=1 (factory.cpp)
};

// This process's rows in table order, host backends first. The planted test row is one only
// while TPB_TEST_PLANT_FALLBACK=1 (read at every call, so a test may set it and ask again).
std::vector<const BackendInfo*> backend_table();
// The row named `name`, or null.
const BackendInfo* find_backend(std::string_view name);

// The rows' names in table order: all of them, or those running on `device`.
std::vector<std::string> backend_names();
std::vector<std::string> backend_names(BackendDevice device);
// The same names joined with ", ", for messages.
std::string backend_list();
std::string backend_list(BackendDevice device);

// The names of the rows compiled into this binary.
std::vector<std::string> available_backends();
// Whether `backend` names a row that runs on the GPU (false for unknown names).
bool is_gpu_backend(const std::string& backend);

}  // namespace tpb
