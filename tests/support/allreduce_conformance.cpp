// The backend-generic allreduce conformance cases (see allreduce_conformance.h).
#include "tests/support/allreduce_conformance.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "tpb/fnv1a.h"
#include "tpb/kernels/allreduce_ref.h"

namespace tpb::test {

void PrintTo(const ConformanceParam& p, std::ostream* os) { *os << p.backend << " tp" << p.world; }

std::string conformance_param_name(const ::testing::TestParamInfo<ConformanceParam>& info) {
  std::string n = info.param.backend + "_tp" + std::to_string(info.param.world);
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

void AllreduceConformance::SetUp() {
  const std::string why = GetParam().target->skip_reason(GetParam().world);
  if (!why.empty()) GTEST_SKIP() << why;
}

void AllreduceConformance::run(const std::function<void(Bootstrap&)>& body, double timeout_s) {
  GetParam().target->run(GetParam().world, body, timeout_s);
}

RankSetup::RankSetup(const ConformanceParam& p, Bootstrap& bs) {
  const CommOptions o = p.target->options();
  p.target->select_device(o);
  comm = make_communicator(p.backend, bs, o);
  memory = p.target->memory(o);
}

RankSetup::~RankSetup() {
  if (comm) comm->barrier();
}

namespace {

// Counter-based generator (splitmix64): element i of rank r for seed s, no state to share.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

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
bool expect_matches(const std::vector<std::uint8_t>& got, const Expected& want, std::size_t count, DType dtype,
                    int max_ulps, const std::string& what) {
  const std::vector<std::uint8_t>& ref = want.bytes;
  EXPECT_EQ(got.size(), ref.size());
  EXPECT_EQ(want.magnitude.size(), count);
  if (got.size() != ref.size() || want.magnitude.size() != count) return false;
  std::size_t bad = 0, worst = 0;
  double worst_err = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const float g = element(got, i, dtype), r = element(ref, i, dtype);
    if (!std::isfinite(g)) {
      ADD_FAILURE() << what << ": non-finite output at " << i;
      return false;
    }
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
  return bad == 0;
}

std::shared_ptr<void> HostMemory::allocate(std::size_t bytes) {
  return std::shared_ptr<void>(new unsigned char[bytes == 0 ? 16 : bytes], std::default_delete<unsigned char[]>());
}
void HostMemory::upload(void* dst, const void* host, std::size_t bytes) { std::memcpy(dst, host, bytes); }
void HostMemory::download(void* host, const void* src, std::size_t bytes) { std::memcpy(host, src, bytes); }
void HostMemory::fill(void* dst, int byte, std::size_t bytes) { std::memset(dst, byte, bytes); }

int ulps_budget(const std::string& backend, int world) {
  return (backend == "nccl" || backend == "auto" || backend == "mpi") && world > 2 ? world - 1 : 0;
}

std::vector<std::uint8_t> reduce_once(Communicator& comm, RankMemory& memory, int world, int rank, std::uint64_t seed,
                                      std::size_t count, DType dtype, bool integers, bool in_place,
                                      std::size_t in_offset, std::size_t out_offset, Expected* expected) {
  const std::size_t es = dtype_size(dtype);
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(make_input(seed, r, count, dtype, integers));
  if (expected != nullptr) *expected = reference(inputs, count, dtype);
  const std::shared_ptr<void> a = memory.allocate((count + in_offset + 16) * es);
  const std::shared_ptr<void> b = memory.allocate((count + out_offset + 16) * es);
  char* in = static_cast<char*>(a.get()) + in_offset * es;
  char* out = in_place ? in : static_cast<char*>(b.get()) + out_offset * es;
  memory.upload(in, inputs[rank].data(), count * es);
  if (!in_place) memory.fill(out, 0xff, count * es);  // poison (NaN)
  comm.all_reduce(in, out, count, dtype, memory.stream());
  std::vector<std::uint8_t> got(count * es);
  memory.download(got.data(), out, count * es);
  memory.synchronize();
  return got;
}

namespace {

// What ran (reference_engine/comm/allreduce_calls.h): see CountsEveryCallUnderTheBackendThatRanIt.
std::uint64_t total_calls(const std::vector<AllreduceCalls>& calls) {
  std::uint64_t n = 0;
  for (const AllreduceCalls& c : calls) n += c.calls;
  return n;
}

}  // namespace

TEST_P(AllreduceConformance, RunsTheRequestedBackend) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    // On H200 NVLink, and between ranks sharing one GPU (CUDA IPC), every custom path must
    // really run custom (a silent NCCL fallback would make the other tests compare NCCL with
    // itself).
    EXPECT_EQ(s.comm->name(), p.backend) << "fallback: " << s.comm->fallback_reason();
    if (p.backend == "auto") {
      EXPECT_FALSE(s.comm->fallback_reason().empty()) << "auto must say which thresholds it uses";
    }
    if (p.target->min_memory_bytes(p.backend) == kHoldsNoBuffers)
      EXPECT_EQ(s.comm->memory_bytes(), 0u);
    else
      EXPECT_GT(s.comm->memory_bytes(), 0u);
    if (const std::size_t least = p.target->min_memory_bytes(p.backend); least > 0 && least != kHoldsNoBuffers) {
      EXPECT_GE(s.comm->memory_bytes(), least);
    }
    if (bs.rank() == 0)
      std::printf("[%s tp%d] memory_bytes=%zu fallback_reason='%s'\n", p.backend.c_str(), p.world,
                  s.comm->memory_bytes(), s.comm->fallback_reason().c_str());
  });
}

TEST_P(AllreduceConformance, IntegerInputsExactAllDtypes) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    for (DType dt : {DType::bf16, DType::f16, DType::f32})
      for (std::size_t count : {std::size_t{4099}, std::size_t{262144}}) {
        Expected want;
        auto got = reduce_once(*s.comm, *s.memory, p.world, bs.rank(), 11 + count, count, dt, true, false, 0, 0, &want);
        expect_matches(got, want, count, dt, 0, std::string("integers ") + std::string(dtype_name(dt)));
      }
  });
}

TEST_P(AllreduceConformance, RandomBf16MatchesReference) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    for (std::size_t count : {std::size_t{8}, std::size_t{4096}, std::size_t{65536}, std::size_t{1} << 20}) {
      Expected want;
      auto got = reduce_once(*s.comm, *s.memory, p.world, bs.rank(), 77 + count, count, DType::bf16, false, false, 0, 0, &want);
      expect_matches(got, want, count, DType::bf16, ulps_budget(p.backend, p.world), "random bf16 count " + std::to_string(count));
    }
  });
}

TEST_P(AllreduceConformance, EveryRankBitwiseIdentical) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    for (std::size_t count : {std::size_t{1000}, std::size_t{300000}}) {
      auto got = reduce_once(*s.comm, *s.memory, p.world, bs.rank(), 5 + count, count, DType::bf16, false, false, 0, 0, nullptr);
      // Exchange a 64-bit FNV-1a digest of the output bytes (the bootstrap carries small strings).
      const auto all = bs.all_gather(std::to_string(fnv1a64(got.data(), got.size())));
      for (int r = 1; r < p.world; ++r)
        EXPECT_EQ(all[r], all[0]) << "rank " << r << "'s output digest differs from rank 0's, count " << count;
    }
  });
}

TEST_P(AllreduceConformance, InPlaceAndOutOfPlace) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    for (bool in_place : {true, false}) {
      Expected want;
      auto got = reduce_once(*s.comm, *s.memory, p.world, bs.rank(), in_place ? 1 : 2, 50000, DType::bf16, false, in_place, 0, 0, &want);
      expect_matches(got, want, 50000, DType::bf16, ulps_budget(p.backend, p.world), in_place ? "in place" : "out of place");
    }
  });
}

TEST_P(AllreduceConformance, OddSizesAndMisalignedBuffers) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    struct Case { std::size_t count, in_off, out_off; bool in_place; };
    for (const Case c : {Case{1, 0, 0, false}, Case{3, 0, 0, false}, Case{13, 1, 3, false}, Case{1001, 3, 0, false},
                         Case{12345, 0, 5, false}, Case{12345, 7, 0, true}, Case{131071, 1, 1, false}}) {
      for (DType dt : {DType::bf16, DType::f32}) {
        Expected want;
        auto got = reduce_once(*s.comm, *s.memory, p.world, bs.rank(), 900 + c.count, c.count, dt, false, c.in_place,
                               c.in_off, c.out_off, &want);
        expect_matches(got, want, c.count, dt, ulps_budget(p.backend, p.world),
                       "count " + std::to_string(c.count) + " in+" + std::to_string(c.in_off) + " out+" +
                           std::to_string(c.out_off) + (c.in_place ? " in place " : " ") + std::string(dtype_name(dt)));
      }
    }
  });
}

TEST_P(AllreduceConformance, Repeated1000TimesFreshInputs) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    // Sizes change every call (grids of 1 to many blocks alternate), so a missing barrier or
    // a buffer reused too early shows up as a wrong element.
    const std::size_t counts[] = {7, 4096, 70001, 3, 262144, 1000, 16384, 524288};
    const std::shared_ptr<void> in = s.memory->allocate(sizeof(std::uint16_t) * 524288);
    const std::shared_ptr<void> out = s.memory->allocate(sizeof(std::uint16_t) * 524288);
    std::size_t failures = 0;
    for (int it = 0; it < 1000 && failures < 5; ++it) {
      const std::size_t count = counts[it % 8];
      std::vector<std::vector<std::uint8_t>> inputs;
      for (int r = 0; r < p.world; ++r) inputs.push_back(make_input(10000 + it, r, count, DType::bf16, false));
      const auto want = reference(inputs, count, DType::bf16);
      const bool in_place = it % 3 == 0;
      void* dst = in_place ? in.get() : out.get();
      s.memory->upload(in.get(), inputs[bs.rank()].data(), count * 2);
      s.comm->all_reduce(in.get(), dst, count, DType::bf16, s.stream());
      std::vector<std::uint8_t> got(count * 2);
      s.memory->download(got.data(), dst, count * 2);
      s.memory->synchronize();
      if (!expect_matches(got, want, count, DType::bf16, ulps_budget(p.backend, p.world), "iteration " + std::to_string(it)))
        ++failures;
    }
  });
}

// What ran (reference_engine/comm/allreduce_calls.h): every all_reduce is counted once, under
// the path that ran it, with its size range; barriers and construction are not counted, and a
// reset starts afresh. A record's allreduce_ran (suite/measure/allreduce_ran.h) is built from these
// counts, so a wrong one would misname the backend a case compared.
TEST_P(AllreduceConformance, CountsEveryCallUnderTheBackendThatRanIt) {
  const ConformanceParam p = GetParam();
  run([&](Bootstrap& bs) {
    RankSetup s(p, bs);
    EXPECT_TRUE(s.comm->allreduce_calls().empty()) << "construction's own collectives were counted";
    const std::size_t counts[] = {7, 4096, 70001, 3, 262144};  // 14 B to 512 KiB, under the 4 MiB buffer
    for (std::size_t count : counts)
      reduce_once(*s.comm, *s.memory, p.world, bs.rank(), 900 + count, count, DType::bf16, true, false, 0, 0, nullptr);
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
      ASSERT_NE(p.target->auto_choice, nullptr);
      for (const AllreduceCalls& c : calls) {
        EXPECT_EQ(p.target->auto_choice(*s.comm, c.bytes_min), c.backend) << c.bytes_min << " B";
        EXPECT_EQ(p.target->auto_choice(*s.comm, c.bytes_max), c.backend) << c.bytes_max << " B";
      }
      std::uint64_t expected_on_each = 0;
      for (const AllreduceCalls& c : calls) {
        std::uint64_t n = 0;
        for (std::size_t count : counts) n += p.target->auto_choice(*s.comm, count * 2) == c.backend;
        EXPECT_EQ(c.calls, n) << c.backend;
        expected_on_each += n;
      }
      EXPECT_EQ(expected_on_each, 5u);
    }
    s.comm->reset_allreduce_calls();
    EXPECT_TRUE(s.comm->allreduce_calls().empty());
  });
}

}  // namespace tpb::test
