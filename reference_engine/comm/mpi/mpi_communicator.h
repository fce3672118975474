// mpi: the CPU communicator for ranks that an MPI launcher started (mpirun, srun), on one
// host or several. Collectives are MPI's own on a duplicate of MPI_COMM_WORLD, whose ranks
// must be the group's ranks: the launcher starts one MPI job per rank group
// (suite/launch/launcher.h), so the job's world is the group.
//
// Numerics: all_reduce sums in fp32 (bf16 and f16 are widened first, MPI has no type for
// them) and rounds once to the buffer's dtype, as every backend does (communicator.h); the
// order of the sum is MPI's (recursive doubling, rings), not rank order. At TP 2 that is the
// same sum (a + b = b + a in IEEE), so mpi is bitwise equal to shm; above TP 2 it is equal
// for integer-valued inputs and within the numerics policy's budget otherwise
// (suite/checks/equal_across_allreduce.h).
//
// MPI has no timeouts: a peer that dies or hangs blocks a collective until the controller's
// case timeout ends the job (suite/launch/launcher.cpp).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/factory.h"

namespace tpb {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over the MPI job: every rank constructs one, in the same order. Initialises MPI
  // on the first call in the process (finalize_mpi, comm/mpi_session.h, ends it). An
  // InputError when this process was not started by an MPI launcher or when the job's world
  // is not the bootstrap's group.
  MpiCommunicator(Bootstrap& bootstrap, const CommOptions& options);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override;
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override;
  void barrier() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  std::size_t memory_bytes() const override { return 0; }
  // Every call runs here: one entry, "mpi".
  std::vector<AllreduceCalls> allreduce_calls() const override { return calls_.entries(); }
  void reset_allreduce_calls() override { calls_.clear(); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<float> wide_;        // bf16/f16 messages widened to fp32 for MPI_SUM
  std::vector<unsigned char> gather_in_;  // all_gather input copied when it overlaps the output
  AllreduceCallTally calls_;
};

}  // namespace tpb
