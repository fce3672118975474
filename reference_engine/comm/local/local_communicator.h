// One rank of a `size`-rank group on the current CUDA device, alone: no data crosses ranks.
// all_reduce leaves this rank's values (its partial sums, in place or copied), all_gather
// writes this rank's slice only. At size 1 that is exact, the collectives of a single rank;
// above it, a way to run one rank's shard of a tensor-parallel step on one GPU and time its
// compute (tpb_bench layer/*), whose numbers are then not a model's. Asynchronous on the
// stream, so a CUDA graph captures it like any other backend. Not a factory backend.
#pragma once

#include <cstddef>
#include <string>

#include "reference_engine/comm/communicator.h"

namespace tpb {

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(int size = 1, int rank = 0);
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override;
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override;
  void barrier() override;  // waits for the device
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return size_ == 1 ? "local" : "local (one rank alone, no communication)"; }
  std::size_t memory_bytes() const override { return 0; }

 private:
  int size_, rank_;
};

}  // namespace tpb
