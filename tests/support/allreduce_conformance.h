// The allreduce conformance cases (numerics policy), written once for every backend: the GPU
// backends (nccl, custom-oneshot, custom-twoshot, auto) run them in tpb_gpu_tests
// (tests/gpu/allreduce_conformance_test.cpp), the shm backend, host memory on the CPU, in
// tpb_unit_tests (tests/unit/shm_communicator_test.cpp). Each binary passes a
// ConformanceTarget that says how its ranks run (forked and placed on GPUs, or threads) and
// where their buffers live (device memory and a CUDA stream, or host memory and none); the
// cases themselves touch neither CUDA nor processes. Every rank generates all ranks' inputs
// from a shared seed, so it can compute the CPU reference (tpb/kernels/allreduce_ref.h)
// locally. Cases that only a GPU backend has (CUDA graphs, device footprint) are in the GPU
// file, on the same fixture.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/factory.h"
#include "tpb/dtype.h"

namespace tpb::test {

// One rank's buffers and the stream its collectives run on. Every transfer is ordered on
// stream(); synchronize() waits for all of them.
class RankMemory {
 public:
  virtual ~RankMemory() = default;
  virtual void* stream() = 0;  // what Communicator::all_reduce takes (nullptr for host backends)
  virtual std::shared_ptr<void> allocate(std::size_t bytes) = 0;  // 16 bytes when 0; freed with the handle
  virtual void upload(void* dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* src, std::size_t bytes) = 0;
  virtual void fill(void* dst, int byte, std::size_t bytes) = 0;
  virtual void synchronize() = 0;
};

// What differs between the binaries that instantiate the cases.
struct ConformanceTarget {
  std::string (*skip_reason)(int world);  // empty where a group of `world` ranks can run here
  // Runs body on every rank of a group of `world`; a rank that fails is a GoogleTest failure.
  void (*run)(int world, const std::function<void(Bootstrap&)>& body, double timeout_s);
  CommOptions (*options)();                      // this rank's options for make_communicator
  void (*select_device)(const CommOptions&);     // before the communicator is made
  std::unique_ptr<RankMemory> (*memory)(const CommOptions&);
  std::size_t (*min_memory_bytes)(const std::string& backend);  // 0: only memory_bytes() > 0;
                                                                // kHoldsNoBuffers: memory_bytes() == 0
  // The path auto's thresholds choose for a message of `bytes` (backend "auto" only).
  std::string (*auto_choice)(const Communicator& comm, std::size_t bytes);
};

// min_memory_bytes for a backend whose buffers are its library's, not its own (mpi): it
// reports none.
constexpr std::size_t kHoldsNoBuffers = static_cast<std::size_t>(-1);

// Host memory, for the host backends (shm, mpi): the transfers are copies, done when they
// return; no stream.
class HostMemory final : public RankMemory {
 public:
  void* stream() override { return nullptr; }
  std::shared_ptr<void> allocate(std::size_t bytes) override;
  void upload(void* dst, const void* host, std::size_t bytes) override;
  void download(void* host, const void* src, std::size_t bytes) override;
  void fill(void* dst, int byte, std::size_t bytes) override;
  void synchronize() override {}
};

struct ConformanceParam {
  std::string backend;
  int world = 0;
  const ConformanceTarget* target = nullptr;
};
void PrintTo(const ConformanceParam& p, std::ostream* os);
// "nccl_tp2", "custom_oneshot_tp4", "shm_tp2".
std::string conformance_param_name(const ::testing::TestParamInfo<ConformanceParam>& info);

class AllreduceConformance : public ::testing::TestWithParam<ConformanceParam> {
 protected:
  void SetUp() override;  // skips with the target's reason
  void run(const std::function<void(Bootstrap&)>& body, double timeout_s = 300);
};

// A rank's communicator for the test's backend and its memory; barrier on the way out.
struct RankSetup {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<RankMemory> memory;
  RankSetup(const ConformanceParam& p, Bootstrap& bs);
  ~RankSetup();
  void* stream() const { return memory->stream(); }
};

// Host bytes for `count` elements: random values in [-2, 2) or integers in [-16, 16]
// (sums of up to 8 ranks stay below 256, exact in bf16, fp16 and fp32).
std::vector<std::uint8_t> make_input(std::uint64_t seed, int rank, std::size_t count, DType dtype, bool integers);

// The serial rank-order sum (tpb/kernels/allreduce_ref.h) and, per element, the sum of the
// inputs' magnitudes sum_r |x_r|: every partial sum of any order is bounded by it, so it sets
// the scale of the rounding error a reduction that rounds after each hop may make.
struct Expected {
  std::vector<std::uint8_t> bytes;  // the reference output, in the buffer's dtype
  std::vector<float> magnitude;     // sum over ranks of |input|, per element
};
Expected reference(const std::vector<std::vector<std::uint8_t>>& inputs, std::size_t count, DType dtype);
float element(const std::vector<std::uint8_t>& v, std::size_t i, DType dtype);

// Bitwise when max_ulps == 0, else within max_ulps ulps of sum |x| (see the .cpp). Records a
// GoogleTest failure naming the worst element and returns false when they differ.
bool expect_matches(const std::vector<std::uint8_t>& got, const Expected& want, std::size_t count, DType dtype,
                    int max_ulps, const std::string& what);

// NCCL rounds after each hop at TP > 2 (and auto may pick NCCL): TP-1 ulps of sum |x| there.
// MPI sums in fp32 in its own order and rounds once: the order alone moves an fp32 result by
// up to TP-1 ulps of sum |x| (and a bf16 one across a rounding boundary), so the same budget.
int ulps_budget(const std::string& backend, int world);

// One allreduce of every rank's input for `seed`; returns this rank's output bytes.
// in_offset/out_offset shift the pointers by whole elements (misalignment); in_place uses
// one buffer for both. Buffers come from `memory`, the collective runs on its stream.
std::vector<std::uint8_t> reduce_once(Communicator& comm, RankMemory& memory, int world, int rank, std::uint64_t seed,
                                      std::size_t count, DType dtype, bool integers, bool in_place,
                                      std::size_t in_offset, std::size_t out_offset, Expected* expected);

}  // namespace tpb::test
