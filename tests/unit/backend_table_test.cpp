// The allreduce backend table (reference_engine/comm/backends.h): what every reader of it
// relies on. Names are unique, host backends come first, what is compiled in is a subset, the
// planner sizes every row and no other name, and the test-only planted row exists only while
// TPB_TEST_PLANT_FALLBACK=1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "reference_engine/comm/backends.h"
#include "reference_engine/comm/mpi_session.h"
#include "reference_engine/memory/comm_bytes.h"
#include "suite/records/build_info.h"
#include "tpb/check.h"

namespace tpb {
namespace {

TEST(BackendTable, NamesAreUniqueAndHostBackendsComeFirst) {
  std::set<std::string> names;
  bool seen_gpu = false;
  for (const BackendInfo* row : backend_table()) {
    EXPECT_TRUE(names.insert(row->name).second) << row->name;
    if (row->runs_on == BackendDevice::gpu) seen_gpu = true;
    else EXPECT_FALSE(seen_gpu) << row->name << " is a host backend after a GPU one";
    EXPECT_FALSE(row->planted_for_tests) << row->name;
    EXPECT_EQ(row->compiled_in, row->make != nullptr) << row->name;
    EXPECT_EQ(find_backend(row->name), row);
  }
  EXPECT_EQ(backend_list(), "shm, mpi, nccl, custom-oneshot, custom-twoshot, auto");
  EXPECT_EQ(backend_list(BackendDevice::host), "shm, mpi");
  EXPECT_EQ(backend_list(BackendDevice::gpu), "nccl, custom-oneshot, custom-twoshot, auto");
}

TEST(BackendTable, CompiledInFollowsTheBuild) {
  const auto available = available_backends();
  const bool gpu = build_info().have_cuda && build_info().have_nccl;
  std::vector<std::string> expected = {"shm"};
  if (mpi_compiled_in()) expected.push_back("mpi");
  if (gpu) expected.insert(expected.end(), {"nccl", "custom-oneshot", "custom-twoshot", "auto"});
  EXPECT_EQ(available, expected);
  EXPECT_TRUE(is_gpu_backend("nccl"));
  EXPECT_FALSE(is_gpu_backend("shm"));
  EXPECT_FALSE(is_gpu_backend("gloo"));
}

TEST(BackendTable, ThePlannerSizesEveryRowAndNoOtherName) {
  for (const BackendInfo* row : backend_table()) {
    const CommBytes b = comm_bytes(row->name, 2, 8 * kMiB, 32, "--allreduce");
    EXPECT_EQ(b.custom_bytes > 0, row->buffers == BackendBuffers::custom_and_nccl) << row->name;
    EXPECT_EQ(b.nccl_bytes > 0, row->buffers != BackendBuffers::none) << row->name;
  }
  try {
    comm_bytes("planted", 2, 8 * kMiB, 32, "plan: --allreduce");
    ADD_FAILURE() << "planted planned without the switch";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "plan: --allreduce: expected one of shm, mpi, nccl, custom-oneshot, custom-twoshot, auto, got 'planted'");
  }
}

// TEST-ONLY: the planted fallback (factory.cpp) is a row only while the switch is on.
TEST(BackendTable, PlantedFallbackRowOnlyWithTheSwitch) {
  EXPECT_EQ(find_backend("planted"), nullptr);
  ::setenv("TPB_TEST_PLANT_FALLBACK", "1", 1);
  const BackendInfo* planted = find_backend("planted");
  const std::string host = backend_list(BackendDevice::host);
  const CommBytes bytes = comm_bytes("planted", 2, 8 * kMiB, 32, "--allreduce");
  ::unsetenv("TPB_TEST_PLANT_FALLBACK");
  ASSERT_NE(planted, nullptr);
  EXPECT_TRUE(planted->planted_for_tests);
  EXPECT_EQ(planted->runs_on, BackendDevice::host);
  EXPECT_EQ(host, "shm, mpi, planted");
  EXPECT_EQ(bytes.total(), 0);
  EXPECT_EQ(find_backend("planted"), nullptr);
}

}  // namespace
}  // namespace tpb
