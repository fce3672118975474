// shm: the CPU communicator. The ranks of a group are processes on one host that share one
// POSIX shared-memory segment: a header with one arrival counter per rank (the barrier) and
// one slot per rank for message data.
//
// all_reduce: every rank copies its input chunk into its own slot, barrier, every rank sums
// all slots element by element in rank order 0..n-1 in fp32 and rounds once to the buffer's
// dtype, barrier (so no slot is overwritten while a slower rank still reads it). That is the
// numerics contract of every backend (communicator.h), so shm results are the bitwise
// reference the GPU backends are compared against. Messages larger than a slot go in chunks.
//
// The segment is created by rank 0 and named through the bootstrap; it is unlinked as soon
// as every rank has mapped it, so a crash later never leaves a name behind in /dev/shm. The
// name starts with the bootstrap's group id and "-": a rank killed before every peer mapped
// it leaves the name, and the launcher, which owns the group, removes what starts so once
// the group's ranks are dead (suite/launch/launcher.cpp).
// Waits spin (yielding, then sleeping) and give up after CommOptions::timeout_s with a
// tpb::Error that names the ranks that did not arrive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/factory.h"

namespace tpb {

class ShmCommunicator final : public Communicator {
 public:
  // Collective: every rank of `bootstrap` constructs one, in the same order.
  // `options.max_bytes` is the slot size per rank (larger messages are chunked).
  ShmCommunicator(Bootstrap& bootstrap, const CommOptions& options);
  ~ShmCommunicator() override;
  ShmCommunicator(const ShmCommunicator&) = delete;
  ShmCommunicator& operator=(const ShmCommunicator&) = delete;

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override;
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                  void* stream) override;
  void barrier() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "shm"; }
  std::size_t memory_bytes() const override { return segment_bytes_; }
  // Every call runs here: one entry, "shm".
  std::vector<AllreduceCalls> allreduce_calls() const override { return calls_.entries(); }
  void reset_allreduce_calls() override { calls_.clear(); }

  std::size_t slot_bytes() const { return slot_bytes_; }

 private:
  unsigned char* slot(int r) const;
  std::uint64_t* arrival_counter(int r) const;
  void wait_for_all(std::uint64_t epoch, const char* what);

  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 60.0;       // how long a wait may last before it fails, seconds
  std::size_t slot_bytes_ = 0;    // data bytes per rank slot
  std::size_t segment_bytes_ = 0; // whole mapping: header + counters + slots, bytes
  unsigned char* base_ = nullptr; // start of the mapping
  std::vector<unsigned char*> slots_;  // slot(r) for r in 0..size-1, in rank order
  std::uint64_t epoch_ = 0;       // barriers this rank has entered (same on every rank)
  AllreduceCallTally calls_;      // all_reduce calls since construction or the last reset
};

}  // namespace tpb
