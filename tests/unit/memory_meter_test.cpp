// MemoryMeter's host-allocation source: a term is what the process really allocated between
// two marks, so a tensor's bytes show up within the allocator's granularity (the floor
// kPlanHostAbsTolerance is built on), and an allocation the engine does not account for
// shows up too.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "reference_engine/memory/meter.h"
#include "suite/checks/plan_matches_measured.h"

namespace tpb {
namespace {

TEST(MemoryMeter, HostAllocationsSeeTheHeapGrow) {
  if (host_allocated_bytes() < 0) GTEST_SKIP() << "the allocator cannot report its live bytes (not glibc >= 2.33)";
  MemoryMeter meter(MemorySource::host_allocations);
  ASSERT_EQ(meter.source(), MemorySource::host_allocations);
  // Tensor-like allocations on both sides of glibc's mmap threshold (128 KiB by default).
  const std::vector<std::size_t> sizes = {100, 4000, 60000, 200000, 3 << 20};
  std::size_t total = 0;
  for (std::size_t s : sizes) total += s * sizeof(float);
  meter.mark("before", 0);
  std::vector<std::unique_ptr<std::vector<float>>> tensors;
  for (std::size_t s : sizes) tensors.push_back(std::make_unique<std::vector<float>>(s, 1.0f));
  meter.mark("after", 0);
  const std::int64_t grown = *meter.growth("before", "after");
  const std::int64_t overhead = grown - static_cast<std::int64_t>(total);
  // Every chunk costs at least its bytes; the rest is headers, rounding and the vectors' own
  // 24 B objects: at most a page per tensor.
  EXPECT_GE(overhead, 0);
  EXPECT_LE(overhead, static_cast<std::int64_t>(sizes.size()) * 4096 + 4096) << "grew " << grown << " for " << total;
  EXPECT_LT(overhead, kPlanHostAbsTolerance);
  const nlohmann::json j = meter.to_json();
  EXPECT_EQ(j["source"], host_allocation_source());
  EXPECT_EQ(j["after"]["used_bytes"].get<std::int64_t>() - j["before"]["used_bytes"].get<std::int64_t>(), grown);
}

TEST(MemoryMeter, AccountingWithoutAHostSource) {
  MemoryMeter meter(false);
  meter.mark("a", 100);
  meter.mark("b", 350);
  EXPECT_EQ(*meter.growth("a", "b"), 250);
  EXPECT_FALSE(meter.growth("a", "c").has_value());
  EXPECT_EQ(meter.to_json()["source"], "accounting");
}

}  // namespace
}  // namespace tpb
