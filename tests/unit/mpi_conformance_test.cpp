// The mpi backend as one instance of the allreduce conformance cases
// (tests/support/allreduce_conformance.h). Its ranks are the processes of an MPI job, so the
// cases run only when this binary is started by mpirun: ctest runs
// `mpirun -np N tpb_unit_tests --gtest_filter=Mpi/AllreduceConformance.*_tpN:MpiJob.*` as
// mpi.allreduce_conformance_npN (tests/CMakeLists.txt), each process one rank. Started
// otherwise (the unit label's own run) they skip, saying so. A build without MPI has none.
#if TPB_HAVE_MPI
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "reference_engine/comm/mpi_session.h"
#include "tests/support/allreduce_conformance.h"

namespace tpb {
namespace {

// The job's ranks exchange the bootstrap's strings through MPI itself (MPI_COMM_WORLD).
class MpiJobBootstrap final : public Bootstrap {
 public:
  MpiJobBootstrap() {
    start_mpi();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> all_gather(const std::string& mine) override {
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      offsets[static_cast<std::size_t>(r)] = total;
      total += lengths[static_cast<std::size_t>(r)];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r)
      out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)])));
    return out;
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  std::string group_id() const override { return "mpi-conformance"; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// MPI ends before the process does (mpirun counts a rank that exits without it as failed).
class FinalizeMpi : public ::testing::Environment {
 public:
  void TearDown() override { finalize_mpi(); }
};
[[maybe_unused]] ::testing::Environment* const g_finalize_mpi = ::testing::AddGlobalTestEnvironment(new FinalizeMpi);

const test::ConformanceTarget kMpiJobTarget = {
    /*skip_reason=*/
    [](int world) -> std::string {
      const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
      if (!launched_by_mpi() || size == nullptr)
        return "the mpi backend's ranks are an MPI job's processes: ctest runs these under mpirun as "
               "mpi.allreduce_conformance_np" + std::to_string(world);
      if (std::atoi(size) != world) return "this mpirun job has " + std::string(size) + " ranks, the case " + std::to_string(world);
      return "";
    },
    /*run=*/
    [](int, const std::function<void(Bootstrap&)>& body, double) {
      MpiJobBootstrap bootstrap;  // this process is one rank; MPI's own timeouts: none (ctest's)
      body(bootstrap);
    },
    /*options=*/[] { return CommOptions{}; },
    /*select_device=*/[](const CommOptions&) {},
    /*memory=*/[](const CommOptions&) -> std::unique_ptr<test::RankMemory> { return std::make_unique<test::HostMemory>(); },
    /*min_memory_bytes=*/[](const std::string&) -> std::size_t { return test::kHoldsNoBuffers; },
    /*auto_choice=*/nullptr,
};

// all_gather (the engine's logits): rank order, from a separate buffer and from the rank's own
// block of the output (MPI forbids overlapping buffers; the backend copies the input first).
TEST(MpiJob, AllGatherApartAndFromItsOwnBlock) {
  const char* job_size = std::getenv("OMPI_COMM_WORLD_SIZE");  // any size: the job's ranks gather
  const std::string why = kMpiJobTarget.skip_reason(job_size != nullptr ? std::atoi(job_size) : 0);
  if (!why.empty()) GTEST_SKIP() << why;
  MpiJobBootstrap bootstrap;
  auto comm = make_communicator("mpi", bootstrap, CommOptions{});
  const int n = bootstrap.size(), me = bootstrap.rank();
  const std::size_t count = 1001;
  std::vector<float> mine(count), out(count * static_cast<std::size_t>(n), -1.0f);
  for (std::size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(me * 10000 + static_cast<int>(i));
  comm->all_gather(mine.data(), out.data(), count, DType::f32, nullptr);
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; i += 97) ASSERT_EQ(out[r * count + i], static_cast<float>(r * 10000 + static_cast<int>(i)));
  std::vector<float> shared(count * static_cast<std::size_t>(n), -1.0f);
  std::copy(mine.begin(), mine.end(), shared.begin() + static_cast<std::ptrdiff_t>(me * count));
  comm->all_gather(shared.data() + me * count, shared.data(), count, DType::f32, nullptr);
  EXPECT_EQ(shared, out);
  comm->barrier();
}

using test::AllreduceConformance;

test::ConformanceParam in_job(int world) { return {"mpi", world, &kMpiJobTarget}; }

INSTANTIATE_TEST_SUITE_P(Mpi, AllreduceConformance, ::testing::Values(in_job(2), in_job(4)), test::conformance_param_name);

}  // namespace
}  // namespace tpb
#endif
