// The rank worker: what `tpbench __worker` does in each rank process the launcher starts.
// It reads its place from the environment its launcher gave it (TPB_LAUNCHER: fork's RANK,
// WORLD_SIZE, LOCAL_RANK; mpirun's OMPI_COMM_WORLD_*; srun's SLURM_*: launch_command.h),
// connects to the controller (TPB_CONTROL_SOCKET, or TPB_CONTROL_ADDR with TPB_CONTROL_TOKEN),
// and serves cases until told to exit:
// find_workload(spec["workload"]) -> run -> send the result (or the error). A workload that
// throws fails only its case; the controller decides what happens to the group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "suite/launch/control_socket.h"

namespace tpb {

// The Bootstrap of a rank worker: all_gather goes to the controller, which answers once
// every rank of the group has contributed (see control_socket.h for the messages).
class SocketBootstrap final : public Bootstrap {
 public:
  // `fd` is the connected control socket; `reader` holds bytes already read from it.
  SocketBootstrap(int fd, control::LineReader& reader, int rank, int size, std::string group_id)
      : fd_(fd), reader_(reader), rank_(rank), size_(size), group_id_(std::move(group_id)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> all_gather(const std::string& mine) override;
  void barrier() override { all_gather(std::string()); }
  std::string group_id() const override { return group_id_; }

 private:
  int fd_;
  control::LineReader& reader_;
  int rank_;
  int size_;
  std::string group_id_;
  std::uint64_t next_seq_ = 0;  // all_gathers this rank has started; the same on every rank
};

// Runs the worker loop; returns the process exit status (0 when the controller said exit or
// went away, 2 when the environment is not a launcher's).
int run_worker();

}  // namespace tpb
