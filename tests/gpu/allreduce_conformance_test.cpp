// Conformance of every GPU allreduce backend (ARCHITECTURE.md, numerics policy), written once
// and instantiated per backend x world size. Each test forks one process per rank
// (fork_group.h), placed one per GPU or, where there are fewer GPUs than ranks, several on one
// GPU (shared placement: same-device peers through CUDA IPC, NCCL over sockets); the body runs
// in every rank. Every rank generates all ranks' inputs from a shared seed, so it can compute
// the CPU reference (tpb/kernels/allreduce_ref.h) locally.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fork_group.h"
#include "reference_engine/comm/auto/auto_communicator.h"
#include "reference_engine/comm/custom/custom_communicator.h"
#include "reference_engine/comm/factory.h"
#include "reference_engine/comm/nccl/nccl_communicator.h"
#include "tpb/cuda_check.h"
#include "tpb/fnv1a.h"
#include "tpb/kernels/allreduce_ref.h"
#include "tpb/kernels/device.h"

namespace tpb::test {
namespace {

struct Param {
  std::string backend;
  int world;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string n = info.param.backend + "_tp" + std::to_string(info.param.world);
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

// Counter-based generator (splitmix64): element i of rank r for seed s, no state to share.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Host bytes for `count` elements: random values in [-2, 2) or integers in [-16, 16]
// (sums of up to 8 ranks stay below 256, exact in bf16, fp16 and fp32).
std::vector<std::uint8_t> make_input(std::uint64_t seed, int rank, std::size_t count, DType dtype, bool integers) {
  std::vector<std::uint8_t> bytes(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t h = mix(seed * 0x100000001b3ull ^ mix(static_cast<std::uint64_t>(rank) << 40 ^ i));
    const float v = integers ? static_cast<float>(static_cast<int>(h % 33) - 16)
                             : static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53 * 4.0 - 2.0);
    if (dtype == DType::f32) {
      std::memcpy(&bytes[4 * i], &v, 4);
    } else {
      const std::uint16_t b = dtype == DType::bf16 ? float_to_bf16(v) : float_to_f16(v);
      std::memcpy(&bytes[2 * i], &b, 2);
    }
  }
  return bytes;
}

// The serial rank-order sum (tpb/kernels/allreduce_ref.h) and, per element, the sum of the
// inputs' magnitudes sum_r |x_r|: every partial sum of any order is bounded by it, so it sets
// the scale of the rounding error a reduction that rounds after each hop may make.
struct Expected {
  std::vector<std::uint8_t> bytes;  // the reference output, in the buffer's dtype
  std::vector<float> magnitude;     // sum over ranks of |input|, per element
};

float element(const std::vector<std::uint8_t>& v, std::size_t i, DType dtype);

Expected reference(const std::vector<std::vector<std::uint8_t>>& inputs, std::size_t count, DType dtype) {
  std::vector<const void*> ptrs;
  for (const auto& in : inputs) ptrs.push_back(in.data());
  Expected e;
  e.bytes.resize(count * dtype_size(dtype));
  allreduce_ref(ptrs, e.bytes.data(), count, dtype);
  e.magnitude.assign(count, 0.f);
  for (const auto& in : inputs)
    for (std::size_t i = 0; i < count; ++i) e.magnitude[i] += std::fabs(element(in, i, dtype));
  return e;
}

float element(const std::vector<std::uint8_t>& v, std::size_t i, DType dtype) {
  if (dtype == DType::f32) {
    float f;
    std::memcpy(&f, &v[4 * i], 4);
    return f;
  }
  std::uint16_t b;
  std::memcpy(&b, &v[2 * i], 2);
  return dtype == DType::bf16 ? bf16_to_float(b) : f16_to_float(b);
}

// Bitwise when max_ulps == 0. Otherwise (NCCL at TP > 2, which rounds to the dtype after each
// of its n-1 ring hops) |got - ref| <= max_ulps ulps of sum_r |x_r|: each hop's rounding is at
// most half an ulp of a partial sum, and no partial sum exceeds sum_r |x_r|, so n-1 hops and
// the reference's own rounding stay within (n-1) such ulps for n >= 2. Ulps of the result
// itself are no bound where the inputs cancel: measured on one H200 (NCCL 2.28.9, TP 4,
// random bf16 in [-2, 2)), 159 of 4096 sums differed from the serial sum by more than 3 ulps of
// the result, e.g. -0.3515625 for -0.36328125, while integer inputs were exact.
void expect_matches(const std::vector<std::uint8_t>& got, const Expected& want, std::size_t count, DType dtype,
                    int max_ulps, const std::string& what) {
  const std::vector<std::uint8_t>& ref = want.bytes;
  ASSERT_EQ(got.size(), ref.size());
  ASSERT_EQ(want.magnitude.size(), count);
  std::size_t bad = 0, worst = 0;
  double worst_err = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const float g = element(got, i, dtype), r = element(ref, i, dtype);
    ASSERT_TRUE(std::isfinite(g)) << what << ": non-finite output at " << i;
    double allowed = 0;
    if (max_ulps > 0) {
      const int mant_bits = dtype == DType::bf16 ? 7 : dtype == DType::f16 ? 10 : 23;
      int e = 0;
      std::frexp(want.magnitude[i] == 0 ? 1e-30f : want.magnitude[i], &e);
      allowed = max_ulps * std::ldexp(1.0, e - 1 - mant_bits);
    }
    const bool ok = max_ulps == 0 ? std::memcmp(&got[i * dtype_size(dtype)], &ref[i * dtype_size(dtype)], dtype_size(dtype)) == 0
                                  : std::fabs(g - r) <= allowed;
    if (!ok) {
      ++bad;
      if (std::fabs(g - r) >= worst_err) worst_err = std::fabs(g - r), worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << count << " elements differ (" << (max_ulps ? "budget " : "bitwise")
                     << (max_ulps ? std::to_string(max_ulps) + " ulps of sum |x|" : std::string()) << "); worst at "
                     << worst << ": got " << element(got, worst, dtype) << " want " << element(ref, worst, dtype)
                     << " (sum |x| " << want.magnitude[worst] << ")";
}

// Device buffer owned by one rank's process.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { TPB_CUDA_CHECK(cudaMalloc(&ptr, bytes == 0 ? 16 : bytes)); }
  ~DeviceBuffer() { (void)cudaFree(ptr); }
  char* bytes() const { return static_cast<char*>(ptr); }
};


// NCCL rounds after each hop at TP > 2 (and auto may pick NCCL): allow TP-1 ulps of sum |x| there.
int ulps_budget(const std::string& backend, int world) {
  return (backend == "nccl" || backend == "auto") && world > 2 ? world - 1 : 0;
}

class AllreduceConformance : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { TPB_SKIP_UNLESS_PLACEABLE(GetParam().world); }
  bool is_custom() const { return GetParam().backend.rfind("custom-", 0) == 0; }
  void run(const std::function<void(Bootstrap&)>& body, double timeout_s = 300) {
    expect_all_ranks_passed(run_ranks(GetParam().world, body, timeout_s));
  }
};

// One allreduce of every rank's input for `seed`; returns this rank's output bytes.
// in_offset/out_offset shift the pointers by whole elements (misalignment); in_place uses
// one buffer for both.
std::vector<std::uint8_t> reduce_once(Communicator& comm, int world, int rank, std::uint64_t seed, std::size_t count,
                                      DType dtype, bool integers, bool in_place, std::size_t in_offset,
                                      std::size_t out_offset, cudaStream_t stream,
                                      Expected* expected) {
  const std::size_t es = dtype_size(dtype);
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(make_input(seed, r, count, dtype, integers));
  if (expected != nullptr) *expected = reference(inputs, count, dtype);
  DeviceBuffer a((count + in_offset + 16) * es), b((count + out_offset + 16) * es);
  char* in = a.bytes() + in_offset * es;
  char* out = in_place ? in : b.bytes() + out_offset * es;
  TPB_CUDA_CHECK(cudaMemcpyAsync(in, inputs[rank].data(), count * es, cudaMemcpyHostToDevice, stream));
  if (!in_place) TPB_CUDA_CHECK(cudaMemsetAsync(out, 0xff, count * es, stream));  // poison (NaN)
  comm.all_reduce(in, out, count, dtype, stream);
  std::vector<std::uint8_t> got(count * es);
  TPB_CUDA_CHECK(cudaMemcpyAsync(got.data(), out, count * es, cudaMemcpyDeviceToHost, stream));
  TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
  return got;
}

struct RankSetup {
  std::unique_ptr<Communicator> comm;
  cudaStream_t stream = nullptr;
  RankSetup(const std::string& backend, Bootstrap& bs, const CommOptions& o) {
    TPB_CUDA_CHECK(cudaSetDevice(o.device));
    comm = make_communicator(backend, bs, o);
    TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~RankSetup() {
    if (comm) comm->barrier();
    (void)cudaStreamDestroy(stream);
  }
};

TEST_P(AllreduceConformance, RunsTheRequestedBackend) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    // On H200 NVLink, and between ranks sharing one GPU (CUDA IPC), every custom path must
    // really run custom (a silent NCCL fallback would make the other tests compare NCCL with
    // itself).
    EXPECT_EQ(s.comm->name(), p.backend) << "fallback: " << s.comm->fallback_reason();
    if (p.backend == "auto") {
      EXPECT_FALSE(s.comm->fallback_reason().empty()) << "auto must say which thresholds it uses";
    }
    EXPECT_GT(s.comm->memory_bytes(), 0u);
    if (is_custom() || p.backend == "auto") {
      EXPECT_GE(s.comm->memory_bytes(), allreduce_allocation_bytes(4u << 20));
    }
    if (bs.rank() == 0)
      std::printf("[%s tp%d] memory_bytes=%zu fallback_reason='%s'\n", p.backend.c_str(), p.world,
                  s.comm->memory_bytes(), s.comm->fallback_reason().c_str());
  });
}

TEST_P(AllreduceConformance, IntegerInputsExactAllDtypes) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    for (DType dt : {DType::bf16, DType::f16, DType::f32})
      for (std::size_t count : {std::size_t{4099}, std::size_t{262144}}) {
        Expected want;
        auto got = reduce_once(*s.comm, p.world, bs.rank(), 11 + count, count, dt, true, false, 0, 0, s.stream, &want);
        expect_matches(got, want, count, dt, 0, std::string("integers ") + std::string(dtype_name(dt)));
      }
  });
}

TEST_P(AllreduceConformance, RandomBf16MatchesReference) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    for (std::size_t count : {std::size_t{8}, std::size_t{4096}, std::size_t{65536}, std::size_t{1} << 20}) {
      Expected want;
      auto got = reduce_once(*s.comm, p.world, bs.rank(), 77 + count, count, DType::bf16, false, false, 0, 0, s.stream, &want);
      expect_matches(got, want, count, DType::bf16, ulps_budget(p.backend, p.world), "random bf16 count " + std::to_string(count));
    }
  });
}

TEST_P(AllreduceConformance, EveryRankBitwiseIdentical) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    for (std::size_t count : {std::size_t{1000}, std::size_t{300000}}) {
      auto got = reduce_once(*s.comm, p.world, bs.rank(), 5 + count, count, DType::bf16, false, false, 0, 0, s.stream, nullptr);
      // Exchange a 64-bit FNV-1a digest of the output bytes (the bootstrap carries small strings).
      const auto all = bs.all_gather(std::to_string(fnv1a64(got.data(), got.size())));
      for (int r = 1; r < p.world; ++r)
        EXPECT_EQ(all[r], all[0]) << "rank " << r << "'s output digest differs from rank 0's, count " << count;
    }
  });
}

TEST_P(AllreduceConformance, InPlaceAndOutOfPlace) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    for (bool in_place : {true, false}) {
      Expected want;
      auto got = reduce_once(*s.comm, p.world, bs.rank(), in_place ? 1 : 2, 50000, DType::bf16, false, in_place, 0, 0, s.stream, &want);
      expect_matches(got, want, 50000, DType::bf16, ulps_budget(p.backend, p.world), in_place ? "in place" : "out of place");
    }
  });
}

TEST_P(AllreduceConformance, OddSizesAndMisalignedBuffers) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    struct Case { std::size_t count, in_off, out_off; bool in_place; };
    for (const Case c : {Case{1, 0, 0, false}, Case{3, 0, 0, false}, Case{13, 1, 3, false}, Case{1001, 3, 0, false},
                         Case{12345, 0, 5, false}, Case{12345, 7, 0, true}, Case{131071, 1, 1, false}}) {
      for (DType dt : {DType::bf16, DType::f32}) {
        Expected want;
        auto got = reduce_once(*s.comm, p.world, bs.rank(), 900 + c.count, c.count, dt, false, c.in_place, c.in_off,
                               c.out_off, s.stream, &want);
        expect_matches(got, want, c.count, dt, ulps_budget(p.backend, p.world),
                       "count " + std::to_string(c.count) + " in+" + std::to_string(c.in_off) + " out+" +
                           std::to_string(c.out_off) + (c.in_place ? " in place " : " ") + std::string(dtype_name(dt)));
      }
    }
  });
}

TEST_P(AllreduceConformance, CudaGraphReplayWithInputOverwritten) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    const std::size_t count = 40000, bytes = count * 2;
    DeviceBuffer in(bytes), out(bytes);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    TPB_CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
    s.comm->all_reduce(in.ptr, out.ptr, count, DType::bf16, s.stream);
    TPB_CUDA_CHECK(cudaMemsetAsync(in.ptr, 0x5a, bytes, s.stream));  // the input dies right after the reduce
    TPB_CUDA_CHECK(cudaStreamEndCapture(s.stream, &graph));
    TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 8; ++replay) {
      std::vector<std::vector<std::uint8_t>> inputs;
      for (int r = 0; r < p.world; ++r) inputs.push_back(make_input(300 + replay, r, count, DType::bf16, false));
      const auto want = reference(inputs, count, DType::bf16);
      TPB_CUDA_CHECK(cudaMemcpyAsync(in.ptr, inputs[bs.rank()].data(), bytes, cudaMemcpyHostToDevice, s.stream));
      TPB_CUDA_CHECK(cudaMemsetAsync(out.ptr, 0xff, bytes, s.stream));
      TPB_CUDA_CHECK(cudaGraphLaunch(exec, s.stream));
      std::vector<std::uint8_t> got(bytes), in_after(bytes);
      TPB_CUDA_CHECK(cudaMemcpyAsync(got.data(), out.ptr, bytes, cudaMemcpyDeviceToHost, s.stream));
      TPB_CUDA_CHECK(cudaMemcpyAsync(in_after.data(), in.ptr, bytes, cudaMemcpyDeviceToHost, s.stream));
      TPB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
      expect_matches(got, want, count, DType::bf16, ulps_budget(p.backend, p.world), "graph replay " + std::to_string(replay));
      EXPECT_EQ(in_after[0], 0x5a);
      EXPECT_EQ(in_after[bytes - 1], 0x5a);
    }
    TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
    TPB_CUDA_CHECK(cudaGraphDestroy(graph));
  });
}

TEST_P(AllreduceConformance, Repeated1000TimesFreshInputs) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    // Sizes change every call (grids of 1 to many blocks alternate), so a missing barrier or
    // a buffer reused too early shows up as a wrong element.
    const std::size_t counts[] = {7, 4096, 70001, 3, 262144, 1000, 16384, 524288};
    DeviceBuffer in(sizeof(std::uint16_t) * 524288), out(sizeof(std::uint16_t) * 524288);
    std::size_t failures = 0;
    for (int it = 0; it < 1000 && failures < 5; ++it) {
      const std::size_t count = counts[it % 8];
      std::vector<std::vector<std::uint8_t>> inputs;
      for (int r = 0; r < p.world; ++r) inputs.push_back(make_input(10000 + it, r, count, DType::bf16, false));
      const auto want = reference(inputs, count, DType::bf16);
      const bool in_place = it % 3 == 0;
      void* dst = in_place ? in.ptr : out.ptr;
      TPB_CUDA_CHECK(cudaMemcpyAsync(in.ptr, inputs[bs.rank()].data(), count * 2, cudaMemcpyHostToDevice, s.stream));
      s.comm->all_reduce(in.ptr, dst, count, DType::bf16, s.stream);
      std::vector<std::uint8_t> got(count * 2);
      TPB_CUDA_CHECK(cudaMemcpyAsync(got.data(), dst, count * 2, cudaMemcpyDeviceToHost, s.stream));
      TPB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
      const bool before = ::testing::Test::HasFailure();
      expect_matches(got, want, count, DType::bf16, ulps_budget(p.backend, p.world), "iteration " + std::to_string(it));
      if (!before && ::testing::Test::HasFailure()) ++failures;
    }
  });
}

TEST_P(AllreduceConformance, MemoryBytesMatchesMeasuredFootprint) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    TPB_CUDA_CHECK(cudaSetDevice(rank_device()));
    TPB_CUDA_CHECK(cudaFree(nullptr));
    std::size_t free0 = 0, free1 = 0, total = 0;
    ASSERT_TRUE(current_device_memory(&free0, &total));
    auto comm = make_communicator(p.backend, bs, comm_options_for_rank());
    ASSERT_TRUE(current_device_memory(&free1, &total));
    // One GPU per rank: the reading is device-wide, so this test is only meaningful with no
    // other process allocating on the GPU meanwhile (scripts/gpu_run.sh runs it on its own,
    // serially). Shared placement: the reading is this process's share less its own usage
    // (tpb/kernels/device.h), so the peers on the same GPU do not move it.
    const double measured = static_cast<double>(free0 - free1), claimed = static_cast<double>(comm->memory_bytes());
    // Allocation granularity (2 MiB pages) and stream/event pools make small differences.
    EXPECT_NEAR(claimed, measured, 0.1 * measured + 16.0 * (1 << 20)) << p.backend << " claims " << claimed << " B";
    comm->barrier();
  });
}

// What ran (reference_engine/comm/allreduce_calls.h): every all_reduce is counted once, under
// the path that ran it, with its size range; barriers and construction are not counted, and a
// reset starts afresh. A record's allreduce_ran (suite/allreduce_ran.h) is built from these
// counts, so a wrong one would misname the backend a case compared.
std::uint64_t total_calls(const std::vector<AllreduceCalls>& calls) {
  std::uint64_t n = 0;
  for (const AllreduceCalls& c : calls) n += c.calls;
  return n;
}

TEST_P(AllreduceConformance, CountsEveryCallUnderTheBackendThatRanIt) {
  const Param p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p.backend, bs, comm_options_for_rank());
    EXPECT_TRUE(s.comm->allreduce_calls().empty()) << "construction's own collectives were counted";
    const std::size_t counts[] = {7, 4096, 70001, 3, 262144};  // 14 B to 512 KiB, under the 4 MiB buffer
    for (std::size_t count : counts)
      reduce_once(*s.comm, p.world, bs.rank(), 900 + count, count, DType::bf16, true, false, 0, 0, s.stream, nullptr);
    s.comm->barrier();  // not an allreduce of the caller's: not counted
    const std::vector<AllreduceCalls> calls = s.comm->allreduce_calls();
    EXPECT_EQ(total_calls(calls), 5u);
    if (p.backend != "auto") {
      ASSERT_EQ(calls.size(), 1u) << "a silent fallback to another path";
      EXPECT_EQ(calls[0].backend, p.backend);
      EXPECT_EQ(calls[0].bytes_min, 6u);
      EXPECT_EQ(calls[0].bytes_max, 262144u * 2);
    } else {
      // Each size class is the path auto's thresholds choose for every size in it.
      const auto* a = dynamic_cast<const AutoCommunicator*>(s.comm.get());
      ASSERT_NE(a, nullptr);
      for (const AllreduceCalls& c : calls) {
        EXPECT_EQ(a->choice_for(c.bytes_min), c.backend) << c.bytes_min << " B";
        EXPECT_EQ(a->choice_for(c.bytes_max), c.backend) << c.bytes_max << " B";
      }
      std::uint64_t expected_on_each = 0;
      for (const AllreduceCalls& c : calls) {
        std::uint64_t n = 0;
        for (std::size_t count : counts) n += a->choice_for(count * 2) == c.backend;
        EXPECT_EQ(c.calls, n) << c.backend;
        expected_on_each += n;
      }
      EXPECT_EQ(expected_on_each, 5u);
    }
    s.comm->reset_allreduce_calls();
    EXPECT_TRUE(s.comm->allreduce_calls().empty());
  });
}

INSTANTIATE_TEST_SUITE_P(Gpu, AllreduceConformance,
                         ::testing::Values(Param{"nccl", 2}, Param{"custom-oneshot", 2}, Param{"custom-twoshot", 2},
                                           Param{"auto", 2}, Param{"nccl", 4}, Param{"custom-oneshot", 4},
                                           Param{"custom-twoshot", 4}, Param{"auto", 4}, Param{"nccl", 8},
                                           Param{"custom-oneshot", 8}, Param{"custom-twoshot", 8}, Param{"auto", 8}),
                         param_name);

// ---- custom-only behaviour ------------------------------------------------------------------

class CustomAllreduce : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { TPB_SKIP_UNLESS_PLACEABLE(GetParam()); }
};

TEST_P(CustomAllreduce, OneShotEqualsTwoShotBitwise) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](Bootstrap& bs) {
    TPB_CUDA_CHECK(cudaSetDevice(rank_device()));
    cudaStream_t stream;
    TPB_CUDA_CHECK(cudaStreamCreate(&stream));
    CustomAllreduceCommunicator one(AllreduceAlgo::one_shot, bs, comm_options_for_rank());
    CustomAllreduceCommunicator two(AllreduceAlgo::two_shot, bs, comm_options_for_rank());
    ASSERT_TRUE(one.custom_available()) << one.fallback_reason();
    for (std::size_t count : {std::size_t{5}, std::size_t{8191}, std::size_t{100003}, std::size_t{1} << 21}) {
      auto a = reduce_once(one, world, bs.rank(), 42 + count, count, DType::bf16, false, false, 0, 0, stream, nullptr);
      auto b = reduce_once(two, world, bs.rank(), 42 + count, count, DType::bf16, false, false, 0, 0, stream, nullptr);
      EXPECT_TRUE(a == b) << "one-shot and two-shot differ at count " << count;
    }
    one.barrier();
    two.barrier();
    TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  }));
}

// ARCHITECTURE.md: at TP=2 every backend is bitwise identical (one fp32 add, one rounding).
// Compared directly here (RandomBf16MatchesReference also compares each with the reference).
TEST_P(CustomAllreduce, CustomEqualsNcclBitwiseAtTp2) {
  const int world = GetParam();
  if (world != 2) GTEST_SKIP() << "the bitwise custom == NCCL rule holds at TP=2 only (NCCL rounds per hop above)";
  expect_all_ranks_passed(run_ranks(world, [&](Bootstrap& bs) {
    TPB_CUDA_CHECK(cudaSetDevice(rank_device()));
    cudaStream_t stream;
    TPB_CUDA_CHECK(cudaStreamCreate(&stream));
    CustomAllreduceCommunicator one(AllreduceAlgo::one_shot, bs, comm_options_for_rank());
    CustomAllreduceCommunicator two(AllreduceAlgo::two_shot, bs, comm_options_for_rank());
    ASSERT_TRUE(one.custom_available()) << one.fallback_reason();
    for (std::size_t count : {std::size_t{3}, std::size_t{7168}, std::size_t{100003}, std::size_t{1} << 20}) {
      auto a = reduce_once(one, world, bs.rank(), 600 + count, count, DType::bf16, false, false, 0, 0, stream, nullptr);
      auto b = reduce_once(two, world, bs.rank(), 600 + count, count, DType::bf16, false, false, 0, 0, stream, nullptr);
      auto n = reduce_once(one.nccl(), world, bs.rank(), 600 + count, count, DType::bf16, false, false, 0, 0, stream, nullptr);
      EXPECT_TRUE(a == n) << "custom one-shot and NCCL differ at count " << count;
      EXPECT_TRUE(b == n) << "custom two-shot and NCCL differ at count " << count;
    }
    one.barrier();
    two.barrier();
    TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  }));
}

TEST_P(CustomAllreduce, FallsBackToNcclAboveMaxBytesAndSaysWhy) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](Bootstrap& bs) {
    TPB_CUDA_CHECK(cudaSetDevice(rank_device()));
    cudaStream_t stream;
    TPB_CUDA_CHECK(cudaStreamCreate(&stream));
    CustomAllreduceCommunicator comm(AllreduceAlgo::two_shot, bs, comm_options_for_rank(64 << 10));
    EXPECT_TRUE(comm.fallback_reason().empty()) << comm.fallback_reason();
    Expected want;
    auto got = reduce_once(comm, world, bs.rank(), 3, 1 << 20, DType::bf16, true, false, 0, 0, stream, &want);
    expect_matches(got, want, 1 << 20, DType::bf16, 0, "2 MiB through the fallback");
    EXPECT_NE(comm.fallback_reason().find("1 message(s) exceeded the registered buffer"), std::string::npos)
        << comm.fallback_reason();
    // A message that fits runs on the custom kernels, and the reason keeps counting only the
    // one that did not (it once kept saying "using nccl" for every later call).
    auto small = reduce_once(comm, world, bs.rank(), 4, 1 << 10, DType::bf16, true, false, 0, 0, stream, &want);
    expect_matches(small, want, 1 << 10, DType::bf16, 0, "2 KiB on the custom kernels");
    EXPECT_TRUE(comm.custom_path_for(std::size_t{1} << 11));
    EXPECT_NE(comm.fallback_reason().find("1 message(s)"), std::string::npos) << comm.fallback_reason();
    comm.barrier();
    TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  }));
}

// The custom backend counts its kernels' calls per algorithm and its NCCL fallback's as "nccl";
// a CUDA graph's replays are not host calls and are not counted again.
TEST_P(CustomAllreduce, CountsEachCallUnderThePathThatRanIt) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](Bootstrap& bs) {
    TPB_CUDA_CHECK(cudaSetDevice(rank_device()));
    cudaStream_t stream;
    TPB_CUDA_CHECK(cudaStreamCreate(&stream));
    CustomAllreduceCommunicator comm(AllreduceAlgo::two_shot, bs, comm_options_for_rank(64 << 10));
    ASSERT_TRUE(comm.custom_available()) << comm.fallback_reason();
    EXPECT_TRUE(comm.allreduce_calls().empty());
    for (int i = 0; i < 3; ++i)
      reduce_once(comm, world, bs.rank(), 10 + i, 1024, DType::bf16, true, false, 0, 0, stream, nullptr);  // 2 KiB
    for (int i = 0; i < 2; ++i)
      reduce_once(comm, world, bs.rank(), 20 + i, 1 << 19, DType::bf16, true, false, 0, 0, stream, nullptr);  // 1 MiB > 64 KiB
    DeviceBuffer buf(8192);
    TPB_CUDA_CHECK(cudaMemsetAsync(buf.ptr, 0, 8192, stream));
    comm.all_reduce_with(AllreduceAlgo::one_shot, buf.ptr, buf.ptr, 2048, DType::bf16, stream);  // 4 KiB, one-shot
    comm.barrier();
    const std::vector<AllreduceCalls> calls = comm.allreduce_calls();  // smallest messages first
    ASSERT_EQ(calls.size(), 3u);
    EXPECT_EQ(calls[0].backend, "custom-twoshot");
    EXPECT_EQ(calls[0].calls, 3u);
    EXPECT_EQ(calls[0].bytes_min, 2048u);
    EXPECT_EQ(calls[0].bytes_max, 2048u);
    EXPECT_EQ(calls[1].backend, "custom-oneshot");
    EXPECT_EQ(calls[1].calls, 1u);
    EXPECT_EQ(calls[1].bytes_max, 4096u);
    EXPECT_EQ(calls[2].backend, "nccl");
    EXPECT_EQ(calls[2].calls, 2u);
    EXPECT_EQ(calls[2].bytes_min, std::size_t{1} << 20);
    EXPECT_NE(comm.fallback_reason().find("2 message(s) exceeded"), std::string::npos) << comm.fallback_reason();
    // A reset starts the count and the size-fallback reason afresh (the suite resets per case).
    comm.reset_allreduce_calls();
    EXPECT_TRUE(comm.allreduce_calls().empty());
    EXPECT_TRUE(comm.fallback_reason().empty()) << comm.fallback_reason();

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    TPB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    comm.all_reduce(buf.ptr, buf.ptr, 1024, DType::bf16, stream);
    TPB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 5; ++replay) TPB_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<AllreduceCalls> captured = comm.allreduce_calls();
    ASSERT_EQ(captured.size(), 1u);
    EXPECT_EQ(captured[0].backend, "custom-twoshot");
    EXPECT_EQ(captured[0].calls, 1u) << "replays are not host calls";
    TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
    TPB_CUDA_CHECK(cudaGraphDestroy(graph));
    comm.barrier();
    TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  }));
}

// Auto with thresholds measured for this GPU and world (a calibration file written here):
// each message counted under the size class its thresholds pick, NCCL above.
TEST_P(CustomAllreduce, AutoCountsItsSizeClasses) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](Bootstrap& bs) {
    TPB_CUDA_CHECK(cudaSetDevice(rank_device()));
    std::string gpu;
    for (const GpuInfo& g : visible_gpus())
      if (g.ordinal == rank_device()) gpu = g.name;
    const std::string path = "/tmp/tpb-auto-thresholds-" + std::to_string(::getpid()) + ".json";
    {
      std::ofstream f(path);
      f << nlohmann::json({{"schema", "tpb.allreduce_thresholds.v1"},
                           {"hardware", {{"gpu", gpu}, {"gpu_count", world}}},
                           {"world_size", world},
                           {"oneshot_max_bytes", 16 << 10},
                           {"twoshot_max_bytes", 256 << 10}})
               .dump();
    }
    ::setenv("TPB_ALLREDUCE_THRESHOLDS", path.c_str(), 1);
    cudaStream_t stream;
    TPB_CUDA_CHECK(cudaStreamCreate(&stream));
    AutoCommunicator comm(bs, comm_options_for_rank(1 << 20));
    std::remove(path.c_str());
    ASSERT_EQ(comm.thresholds().twoshot_max_bytes, std::size_t{256} << 10) << comm.fallback_reason();
    ASSERT_EQ(comm.choice_for(8 << 10), "custom-oneshot") << comm.fallback_reason();
    // 4 x 8 KiB one-shot, 2 x 128 KiB two-shot, 512 KiB (above two-shot) and 2 MiB (above the
    // buffer) on NCCL; integers, so every path gives the reference bitwise at any TP.
    const std::pair<std::size_t, int> plan[] = {{4096, 4}, {65536, 2}, {262144, 1}, {1 << 20, 1}};
    for (const auto& [count, times] : plan)
      for (int i = 0; i < times; ++i) {
        Expected want;
        auto got = reduce_once(comm, world, bs.rank(), 40 + count + i, count, DType::bf16, true, false, 0, 0, stream, &want);
        expect_matches(got, want, count, DType::bf16, 0, "auto " + std::to_string(count * 2) + " B");
      }
    comm.barrier();
    const std::vector<AllreduceCalls> calls = comm.allreduce_calls();
    ASSERT_EQ(calls.size(), 3u);
    EXPECT_EQ(calls[0].backend, "custom-oneshot");
    EXPECT_EQ(calls[0].calls, 4u);
    EXPECT_EQ(calls[0].bytes_min, std::size_t{8} << 10);
    EXPECT_EQ(calls[0].bytes_max, std::size_t{8} << 10);
    EXPECT_EQ(calls[1].backend, "custom-twoshot");
    EXPECT_EQ(calls[1].calls, 2u);
    EXPECT_EQ(calls[1].bytes_max, std::size_t{128} << 10);
    EXPECT_EQ(calls[2].backend, "nccl");
    EXPECT_EQ(calls[2].calls, 2u);
    EXPECT_EQ(calls[2].bytes_min, std::size_t{512} << 10);
    EXPECT_EQ(calls[2].bytes_max, std::size_t{2} << 20);
    TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  }));
}

TEST_P(CustomAllreduce, PeerThatNeverArrivesIsAClearErrorNotAHang) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](Bootstrap& bs) {
    TPB_CUDA_CHECK(cudaSetDevice(rank_device()));
    cudaStream_t stream;
    TPB_CUDA_CHECK(cudaStreamCreate(&stream));
    CustomAllreduceCommunicator comm(AllreduceAlgo::one_shot, bs, comm_options_for_rank(1 << 20, /*timeout_s=*/1.0));
    ASSERT_TRUE(comm.custom_available()) << comm.fallback_reason();
    DeviceBuffer buf(4096);
    TPB_CUDA_CHECK(cudaMemset(buf.ptr, 0, 4096));
    if (bs.rank() == 0) {  // the only rank that calls: its kernel must give up on its own
      const auto t0 = std::chrono::steady_clock::now();
      comm.all_reduce(buf.ptr, buf.ptr, 2048, DType::bf16, stream);
      TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
      const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(waited_s, 10.0);
      EXPECT_GE(waited_s, 0.9);
      try {
        comm.check_errors();
        ADD_FAILURE() << "no error reported for a peer that never arrived";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("never arrived"), std::string::npos) << e.what();
      }
      // Later calls are refused instead of touching the half-synchronised buffers.
      EXPECT_THROW(comm.all_reduce(buf.ptr, buf.ptr, 2048, DType::bf16, stream), Error);
    }
    bs.barrier();
    TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  }, 120));
}

INSTANTIATE_TEST_SUITE_P(Gpu, CustomAllreduce, ::testing::Values(2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return "tp" + std::to_string(i.param); });

}  // namespace
}  // namespace tpb::test
