// The shm communicator against its spec: a serial fp32 sum in rank order 0..n-1, rounded
// once to the dtype, bitwise. Ranks are threads of this process with the rank-group kit's
// bootstrap (tests/support/test_ranks.h; the segment logic is the same as between processes);
// the launcher tests run the same backend across real rank processes. shm is also one
// instance of the allreduce conformance cases every backend runs
// (tests/support/allreduce_conformance.h), host memory on the CPU; the cases here are shm's
// own (small slots, so messages go in chunks; inputs whose sums round; timeouts, names).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "reference_engine/comm/factory.h"
#include "reference_engine/comm/shm/shm_communicator.h"
#include "tests/support/allreduce_conformance.h"
#include "tests/support/test_ranks.h"
#include "tpb/check.h"
#include "tpb/dtype.h"

namespace tpb {
namespace {

// Runs fn(rank, bootstrap) on `world_size` rank threads; a rank that throws fails the test.
void run_ranks(int world_size, const std::function<void(int, Bootstrap&)>& fn) {
  test::expect_all_ranks_passed(test::run_thread_ranks(world_size, [&](Bootstrap& bootstrap) { fn(bootstrap.rank(), bootstrap); }));
}

// Random values of `dtype` (stored as its bits) with exponents spread over 2^-20..2^6, so fp32
// sums round and the order of summation shows in the result.
std::vector<std::uint16_t> random_half_bits(std::mt19937_64& rng, std::size_t n, DType dtype) {
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 6);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) {
    float f = std::ldexp(mantissa(rng), exponent(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
    x = dtype == DType::bf16 ? float_to_bf16(f) : float_to_f16(f);
  }
  return v;
}

std::vector<float> random_f32(std::mt19937_64& rng, std::size_t n) {
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 6);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(mantissa(rng), exponent(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
  return v;
}

// Inputs as raw bytes, one buffer per rank.
std::vector<std::vector<unsigned char>> random_inputs(std::uint64_t seed, int world_size, std::size_t count,
                                                      DType dtype) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<unsigned char>> inputs;
  for (int r = 0; r < world_size; ++r) {
    std::vector<unsigned char> bytes(count * dtype_size(dtype));
    if (dtype == DType::f32) {
      auto v = random_f32(rng, count);
      std::memcpy(bytes.data(), v.data(), bytes.size());
    } else {
      auto v = random_half_bits(rng, count, dtype);
      std::memcpy(bytes.data(), v.data(), bytes.size());
    }
    inputs.push_back(std::move(bytes));
  }
  return inputs;
}

float load(const std::vector<unsigned char>& b, std::size_t i, DType dtype) {
  if (dtype == DType::f32) {
    float f;
    std::memcpy(&f, b.data() + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, b.data() + 2 * i, 2);
  return dtype == DType::bf16 ? bf16_to_float(h) : f16_to_float(h);
}

// The spec: a plain loop, fp32 accumulation in rank order, one rounding.
std::vector<unsigned char> serial_sum(const std::vector<std::vector<unsigned char>>& inputs, std::size_t count,
                                      DType dtype) {
  std::vector<unsigned char> out(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    float acc = load(inputs[0], i, dtype);
    for (std::size_t r = 1; r < inputs.size(); ++r) acc += load(inputs[r], i, dtype);
    if (dtype == DType::f32) {
      std::memcpy(out.data() + 4 * i, &acc, 4);
    } else {
      const std::uint16_t h = dtype == DType::bf16 ? float_to_bf16(acc) : float_to_f16(acc);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

struct ShmParam {
  int world_size;
  DType dtype;
};

class ShmAllReduce : public ::testing::TestWithParam<ShmParam> {};

// Slots of 4 KiB: the larger counts below span several chunks.
constexpr std::size_t kSlotBytes = 4096;

TEST_P(ShmAllReduce, BitwiseEqualToSerialSumInRankOrder) {
  const int world_size = GetParam().world_size;  // not a structured binding: clang 14 cannot capture one
  const DType dtype = GetParam().dtype;
  const std::size_t elem = dtype_size(dtype);
  // 1 element, sizes that are not a multiple of 16 bytes, exactly one slot, several slots + a tail.
  const std::vector<std::size_t> counts = {1, 7, 333, kSlotBytes / elem, 3 * kSlotBytes / elem + 5};
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<std::vector<std::vector<unsigned char>>> inputs;
  for (std::size_t c = 0; c < counts.size(); ++c) inputs.push_back(random_inputs(seed + c, world_size, counts[c], dtype));
  std::vector<std::vector<std::vector<unsigned char>>> outputs(counts.size(),
                                                              std::vector<std::vector<unsigned char>>(world_size));

  run_ranks(world_size, [&](int rank, Bootstrap& bootstrap) {
    CommOptions options;
    options.max_bytes = kSlotBytes;
    options.timeout_s = 20;
    auto comm = make_communicator("shm", bootstrap, options);
    ASSERT_EQ(comm->name(), "shm");
    ASSERT_EQ(comm->rank(), rank);
    ASSERT_EQ(comm->size(), world_size);
    ASSERT_GE(comm->memory_bytes(), kSlotBytes * static_cast<std::size_t>(world_size));
    for (std::size_t c = 0; c < counts.size(); ++c) {
      auto& out = outputs[c][static_cast<std::size_t>(rank)];
      out.assign(counts[c] * elem, 0xAB);
      comm->all_reduce(inputs[c][static_cast<std::size_t>(rank)].data(), out.data(), counts[c], dtype, nullptr);
    }
  });

  for (std::size_t c = 0; c < counts.size(); ++c) {
    const auto expected = serial_sum(inputs[c], counts[c], dtype);
    for (int r = 0; r < world_size; ++r) {
      const auto& got = outputs[c][static_cast<std::size_t>(r)];
      ASSERT_EQ(got.size(), expected.size());
      std::size_t first_diff = got.size();
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (got[i] != expected[i]) {
          first_diff = i;
          break;
        }
      }
      EXPECT_EQ(first_diff, got.size()) << "count " << counts[c] << ", rank " << r << ": first differing byte "
                                        << first_diff << " (element " << first_diff / elem << ")";
    }
  }
}

TEST_P(ShmAllReduce, InPlaceMatchesOutOfPlace) {
  const int world_size = GetParam().world_size;  // not a structured binding: clang 14 cannot capture one
  const DType dtype = GetParam().dtype;
  const std::size_t count = 2 * kSlotBytes / dtype_size(dtype) + 3;
  const auto inputs = random_inputs(std::random_device{}(), world_size, count, dtype);
  const auto expected = serial_sum(inputs, count, dtype);
  std::vector<std::vector<unsigned char>> buffers = inputs;
  run_ranks(world_size, [&](int rank, Bootstrap& bootstrap) {
    CommOptions options;
    options.max_bytes = kSlotBytes;
    auto comm = make_communicator("shm", bootstrap, options);
    auto& b = buffers[static_cast<std::size_t>(rank)];
    comm->all_reduce(b.data(), b.data(), count, dtype, nullptr);
  });
  for (int r = 0; r < world_size; ++r) EXPECT_TRUE(buffers[static_cast<std::size_t>(r)] == expected) << "rank " << r;
}

TEST_P(ShmAllReduce, AllGatherConcatenatesInRankOrder) {
  const int world_size = GetParam().world_size;  // not a structured binding: clang 14 cannot capture one
  const DType dtype = GetParam().dtype;
  const std::size_t elem = dtype_size(dtype);
  const std::size_t count = kSlotBytes / elem + 9;  // more than one slot, not a multiple of 16 bytes
  const auto inputs = random_inputs(std::random_device{}(), world_size, count, dtype);
  std::vector<unsigned char> expected;
  for (const auto& in : inputs) expected.insert(expected.end(), in.begin(), in.end());
  std::vector<std::vector<unsigned char>> outputs(static_cast<std::size_t>(world_size));
  run_ranks(world_size, [&](int rank, Bootstrap& bootstrap) {
    CommOptions options;
    options.max_bytes = kSlotBytes;
    auto comm = make_communicator("shm", bootstrap, options);
    auto& out = outputs[static_cast<std::size_t>(rank)];
    out.assign(expected.size(), 0);
    comm->all_gather(inputs[static_cast<std::size_t>(rank)].data(), out.data(), count, dtype, nullptr);
    comm->barrier();
  });
  for (int r = 0; r < world_size; ++r) EXPECT_TRUE(outputs[static_cast<std::size_t>(r)] == expected) << "rank " << r;
}

std::string param_name(const ::testing::TestParamInfo<ShmParam>& info) {
  return std::string(dtype_name(info.param.dtype)) + "_" + std::to_string(info.param.world_size) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Shm, ShmAllReduce,
                         ::testing::Values(ShmParam{1, DType::f32}, ShmParam{2, DType::f32}, ShmParam{3, DType::f32},
                                           ShmParam{4, DType::f32}, ShmParam{1, DType::bf16}, ShmParam{2, DType::bf16},
                                           ShmParam{3, DType::bf16}, ShmParam{4, DType::bf16}, ShmParam{2, DType::f16},
                                           ShmParam{4, DType::f16}),
                         param_name);

// A rank that never calls the collective: the others fail within the timeout, naming it.
TEST(ShmCommunicator, MissingRankTimesOutNamingIt) {
  std::vector<std::string> errors(3);
  run_ranks(3, [&](int rank, Bootstrap& bootstrap) {
    CommOptions options;
    options.max_bytes = 256;
    options.timeout_s = 0.3;
    auto comm = make_communicator("shm", bootstrap, options);
    if (rank == 2) return;  // rank 2 skips the all_reduce
    std::vector<float> buf(10, 1.0f);
    try {
      comm->all_reduce(buf.data(), buf.data(), buf.size(), DType::f32, nullptr);
    } catch (const Error& e) {
      errors[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find("rank 2 did not arrive within 0.3 s"), std::string::npos)
        << errors[static_cast<std::size_t>(r)];
  }
}

// Every rank has unlinked nothing it did not need: after construction the name is gone.
TEST(ShmCommunicator, SegmentNameIsRemovedOnceMapped) {
  std::string group_id;
  run_ranks(2, [&](int rank, Bootstrap& bootstrap) {
    if (rank == 0) group_id = bootstrap.group_id();
    CommOptions options;
    options.max_bytes = 1024;
    auto comm = make_communicator("shm", bootstrap, options);
    comm->barrier();
  });
  ASSERT_FALSE(group_id.empty());
  // /dev/shm is where glibc's shm_open puts names on Linux.
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_EQ(entry.path().filename().string().find(group_id), std::string::npos) << entry.path();
  }
}

// The shm backend counts every all_reduce as its own (chunking a large message is still one
// call), barriers and all_gathers not at all, and starts afresh on reset.
TEST(ShmCommunicator, CountsItsAllreduceCallsPerCase) {
  std::vector<std::vector<AllreduceCalls>> seen(2), after_reset(2);
  run_ranks(2, [&](int rank, Bootstrap& bootstrap) {
    CommOptions options;
    options.max_bytes = 256;  // a 1 KiB message goes in 4 chunks
    auto comm = make_communicator("shm", bootstrap, options);
    std::vector<float> buf(256, 1.0f), gathered(512);
    comm->all_reduce(buf.data(), buf.data(), 256, DType::f32, nullptr);  // 1 KiB
    comm->all_reduce(buf.data(), buf.data(), 3, DType::f32, nullptr);    // 12 B
    comm->all_reduce(buf.data(), buf.data(), 100, DType::f32, nullptr);  // 400 B
    comm->barrier();
    comm->all_gather(buf.data(), gathered.data(), 256, DType::f32, nullptr);
    seen[static_cast<std::size_t>(rank)] = comm->allreduce_calls();
    comm->reset_allreduce_calls();
    after_reset[static_cast<std::size_t>(rank)] = comm->allreduce_calls();
  });
  for (int r = 0; r < 2; ++r) {
    const auto& calls = seen[static_cast<std::size_t>(r)];
    ASSERT_EQ(calls.size(), 1u) << "rank " << r;
    EXPECT_EQ(calls[0].backend, "shm");
    EXPECT_EQ(calls[0].calls, 3u);
    EXPECT_EQ(calls[0].bytes_min, 12u);
    EXPECT_EQ(calls[0].bytes_max, 1024u);
    EXPECT_TRUE(after_reset[static_cast<std::size_t>(r)].empty());
  }
}

// TEST-ONLY planted fault (factory.cpp): with TPB_TEST_PLANT_FALLBACK=1, asking for "planted" gives
// shm and says so, as a custom backend without peer access gives NCCL; without it, mpi is not
// in this build.
TEST(ShmCommunicator, PlantedFallbackRunsShmAndSaysSo) {
  const std::vector<std::string> without_plant = available_backends();
  EXPECT_EQ(std::count(without_plant.begin(), without_plant.end(), "planted"), 0);
  ::setenv("TPB_TEST_PLANT_FALLBACK", "1", 1);
  const std::vector<std::string> with_plant = available_backends();
  std::vector<std::vector<AllreduceCalls>> calls(2);
  std::vector<std::string> names(2), reasons(2);
  try {
    run_ranks(2, [&](int rank, Bootstrap& bootstrap) {
      auto comm = make_communicator("planted", bootstrap, CommOptions{});
      std::vector<float> buf(8, 1.0f);
      comm->all_reduce(buf.data(), buf.data(), buf.size(), DType::f32, nullptr);
      calls[static_cast<std::size_t>(rank)] = comm->allreduce_calls();
      names[static_cast<std::size_t>(rank)] = comm->name();
      reasons[static_cast<std::size_t>(rank)] = comm->fallback_reason();
    });
  } catch (...) {
    ::unsetenv("TPB_TEST_PLANT_FALLBACK");
    throw;
  }
  ::unsetenv("TPB_TEST_PLANT_FALLBACK");
  EXPECT_EQ(std::count(with_plant.begin(), with_plant.end(), "planted"), 1);
  EXPECT_EQ(names[0], "shm");
  EXPECT_NE(reasons[0].find("planted by TPB_TEST_PLANT_FALLBACK"), std::string::npos) << reasons[0];
  ASSERT_EQ(calls[1].size(), 1u);
  EXPECT_EQ(calls[1][0].backend, "shm");
  EXPECT_EQ(calls[1][0].calls, 1u);
  run_ranks(1, [&](int, Bootstrap& bootstrap) { EXPECT_THROW(make_communicator("planted", bootstrap, CommOptions{}), InputError); });
}

// ---- shm as one instance of the allreduce conformance cases ---------------------------------

// Ranks as threads, buffers in host memory, the GPU cases' 4 MiB buffer and 60 s timeout.
const test::ConformanceTarget kHostTarget = {
    /*skip_reason=*/[](int) { return std::string(); },
    /*run=*/
    [](int world, const std::function<void(Bootstrap&)>& body, double timeout_s) {
      test::expect_all_ranks_passed(test::run_thread_ranks(world, body, timeout_s));
    },
    /*options=*/
    [] {
      CommOptions o;
      o.max_bytes = 4u << 20;
      o.timeout_s = 60;
      return o;
    },
    /*select_device=*/[](const CommOptions&) {},
    /*memory=*/[](const CommOptions&) -> std::unique_ptr<test::RankMemory> { return std::make_unique<test::HostMemory>(); },
    /*min_memory_bytes=*/[](const std::string&) -> std::size_t { return 0; },
    /*auto_choice=*/nullptr,
};

using test::AllreduceConformance;

test::ConformanceParam on_host(const char* backend, int world) { return {backend, world, &kHostTarget}; }

// TP 2 and 4, as the GPU instances; TP 8 would be 8 spinning rank threads on a CI machine's
// few cores, and shm's TP 3 and world 1 are covered by ShmAllReduce above.
INSTANTIATE_TEST_SUITE_P(Cpu, AllreduceConformance, ::testing::Values(on_host("shm", 2), on_host("shm", 4)),
                         test::conformance_param_name);

}  // namespace
}  // namespace tpb
