// Conformance of every GPU allreduce backend (ARCHITECTURE.md, numerics policy): the
// backend-generic cases of tests/support/allreduce_conformance.h, instantiated per backend x
// world size, plus the cases only a GPU backend has (CUDA graphs, device footprint) and the
// custom backend's own. Each test forks one process per rank (fork_group.h), placed one per GPU
// or, where there are fewer GPUs than ranks, several on one GPU (shared placement: same-device
// peers through CUDA IPC, NCCL over sockets); the body runs in every rank.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
#include "tests/support/allreduce_conformance.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/allreduce.h"
#include "tpb/kernels/device.h"

namespace tpb::test {
namespace {

// Device buffer owned by one rank's process.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { TPB_CUDA_CHECK(cudaMalloc(&ptr, bytes == 0 ? 16 : bytes)); }
  ~DeviceBuffer() { (void)cudaFree(ptr); }
  char* bytes() const { return static_cast<char*>(ptr); }
};

// A rank's device memory; transfers are ordered on `stream`, which it owns when it made it.
class DeviceMemory final : public RankMemory {
 public:
  explicit DeviceMemory(cudaStream_t stream, bool owned = false) : stream_(stream), owned_(owned) {}
  ~DeviceMemory() override {
    if (owned_) (void)cudaStreamDestroy(stream_);
  }
  void* stream() override { return stream_; }
  std::shared_ptr<void> allocate(std::size_t bytes) override {
    void* p = nullptr;
    TPB_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 16 : bytes));
    return std::shared_ptr<void>(p, [](void* q) { (void)cudaFree(q); });
  }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    TPB_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    TPB_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
  }
  void fill(void* dst, int byte, std::size_t bytes) override { TPB_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, stream_)); }
  void synchronize() override { TPB_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_;
  bool owned_;
};

// Ranks forked and placed on the GPUs (fork_group.h), buffers in device memory.
const ConformanceTarget kGpuTarget = {
    /*skip_reason=*/[](int world) { return placement_skip_reason(world); },
    /*run=*/
    [](int world, const std::function<void(Bootstrap&)>& body, double timeout_s) {
      expect_all_ranks_passed(run_ranks(world, body, timeout_s));
    },
    /*options=*/[] { return comm_options_for_rank(); },
    /*select_device=*/[](const CommOptions& o) { TPB_CUDA_CHECK(cudaSetDevice(o.device)); },
    /*memory=*/
    [](const CommOptions&) -> std::unique_ptr<RankMemory> {
      cudaStream_t stream = nullptr;
      TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      return std::make_unique<DeviceMemory>(stream, /*owned=*/true);
    },
    /*min_memory_bytes=*/
    [](const std::string& backend) -> std::size_t {
      const bool custom = backend.rfind("custom-", 0) == 0;
      return custom || backend == "auto" ? allreduce_allocation_bytes(4u << 20) : 0;
    },
    /*auto_choice=*/
    [](const Communicator& comm, std::size_t bytes) {
      const auto* a = dynamic_cast<const AutoCommunicator*>(&comm);
      TPB_CHECK(a != nullptr, "backend auto made a " << comm.name() << " communicator");
      return a->choice_for(bytes);
    },
};

// The same reduce_once on a stream of the caller's (the custom-only tests make their own).
std::vector<std::uint8_t> reduce_once(Communicator& comm, int world, int rank, std::uint64_t seed, std::size_t count,
                                      DType dtype, bool integers, bool in_place, std::size_t in_offset,
                                      std::size_t out_offset, cudaStream_t stream, Expected* expected) {
  DeviceMemory memory(stream);
  return ::tpb::test::reduce_once(comm, memory, world, rank, seed, count, dtype, integers, in_place, in_offset,
                                  out_offset, expected);
}

// ---- cases only a GPU backend has ------------------------------------------------------------

TEST_P(AllreduceConformance, CudaGraphReplayWithInputOverwritten) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    const auto stream = static_cast<cudaStream_t>(s.stream());
    const std::size_t count = 40000, bytes = count * 2;
    DeviceBuffer in(bytes), out(bytes);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    TPB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    s.comm->all_reduce(in.ptr, out.ptr, count, DType::bf16, stream);
    TPB_CUDA_CHECK(cudaMemsetAsync(in.ptr, 0x5a, bytes, stream));  // the input dies right after the reduce
    TPB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 8; ++replay) {
      std::vector<std::vector<std::uint8_t>> inputs;
      for (int r = 0; r < p.world; ++r) inputs.push_back(make_input(300 + replay, r, count, DType::bf16, false));
      const auto want = reference(inputs, count, DType::bf16);
      TPB_CUDA_CHECK(cudaMemcpyAsync(in.ptr, inputs[bs.rank()].data(), bytes, cudaMemcpyHostToDevice, stream));
      TPB_CUDA_CHECK(cudaMemsetAsync(out.ptr, 0xff, bytes, stream));
      TPB_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      std::vector<std::uint8_t> got(bytes), in_after(bytes);
      TPB_CUDA_CHECK(cudaMemcpyAsync(got.data(), out.ptr, bytes, cudaMemcpyDeviceToHost, stream));
      TPB_CUDA_CHECK(cudaMemcpyAsync(in_after.data(), in.ptr, bytes, cudaMemcpyDeviceToHost, stream));
      TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
      expect_matches(got, want, count, DType::bf16, ulps_budget(p.backend, p.world), "graph replay " + std::to_string(replay));
      EXPECT_EQ(in_after[0], 0x5a);
      EXPECT_EQ(in_after[bytes - 1], 0x5a);
    }
    TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
    TPB_CUDA_CHECK(cudaGraphDestroy(graph));
  });
}

TEST_P(AllreduceConformance, MemoryBytesMatchesMeasuredFootprint) {
  const ConformanceParam p = GetParam();
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

ConformanceParam on_gpus(const char* backend, int world) { return {backend, world, &kGpuTarget}; }

INSTANTIATE_TEST_SUITE_P(Gpu, AllreduceConformance,
                         ::testing::Values(on_gpus("nccl", 2), on_gpus("custom-oneshot", 2), on_gpus("custom-twoshot", 2),
                                           on_gpus("auto", 2), on_gpus("nccl", 4), on_gpus("custom-oneshot", 4),
                                           on_gpus("custom-twoshot", 4), on_gpus("auto", 4), on_gpus("nccl", 8),
                                           on_gpus("custom-oneshot", 8), on_gpus("custom-twoshot", 8), on_gpus("auto", 8)),
                         conformance_param_name);

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
