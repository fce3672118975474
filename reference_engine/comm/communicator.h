// Communicator: the collectives the tensor-parallel engine needs, one interface for every
// backend (shm, nccl, custom-oneshot, custom-twoshot, auto). The engine and the suite see
// only this header; each backend lives in its own folder under comm/.
//
// Numerics contract (ARCHITECTURE.md): every backend sums in fp32 in rank order 0..n-1 and
// rounds once to the buffer's dtype, except NCCL at TP > 2, which rounds after each hop.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "reference_engine/comm/allreduce_calls.h"
#include "tpb/dtype.h"

namespace tpb {

class Communicator {
 public:
  virtual ~Communicator() = default;

  // out[i] = sum over ranks of in[i]. `in` may equal `out` (in place). Pointers are host
  // memory for CPU backends and device memory for GPU backends; `stream` is a cudaStream_t
  // (nullptr = default stream) and is ignored by CPU backends. Asynchronous on GPU backends.
  virtual void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) = 0;

  // out = concat over ranks (rank order) of in[0..count_per_rank). `out` holds size()*count_per_rank.
  virtual void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                          void* stream) = 0;

  // Blocks the host until every rank has arrived (and, on GPU backends, its stream work is done).
  virtual void barrier() = 0;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The backend actually running, e.g. "custom-oneshot" or "nccl".
  virtual std::string name() const = 0;
  // Bytes this backend holds on each device (0 for CPU backends' device memory; shm reports
  // its shared segment). Counted by the memory planner and meter.
  virtual std::size_t memory_bytes() const = 0;
  // Optional: why a requested backend runs another one instead (e.g. "no peer access:
  // using nccl"), empty when it runs as asked.
  virtual std::string fallback_reason() const { return {}; }
  // Optional: the all_reduce calls since construction or the last reset_allreduce_calls(),
  // one entry per path that carried some (allreduce_calls.h): a backend that may run a call
  // on another path (custom's NCCL fallback, auto's size classes) names the one that ran.
  // Empty when the backend does not count.
  virtual std::vector<AllreduceCalls> allreduce_calls() const { return {}; }
  // Optional: starts the count afresh (the suite does at the start of each case). Local to
  // this rank: not a collective.
  virtual void reset_allreduce_calls() {}
  // Optional: throws a tpb::Error when an asynchronous call of this rank failed (the custom
  // kernels' timeout or a mismatch with a peer, whose outputs are NaN). Cheap and never
  // synchronizes: callers check after each synchronization of the stream (the GPU engine's
  // synchronize(), barrier()), so a failure in a replayed graph surfaces there too.
  virtual void check_errors() const {}
};

}  // namespace tpb
