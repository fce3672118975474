// diagnose_hang on its own (the launcher's timeout text, suite/launch/collective_progress.h), and the
// progress page as a rank sees it: a ProgressCommunicator counts every collective, in and out,
// and an exception from the backend still counts as leaving.
#include <gtest/gtest.h>

#include <unistd.h>

#include <memory>
#include <stdexcept>

#include "suite/launch/collective_progress.h"

namespace tpb {
namespace {

RankProgress silent(int rank, std::uint64_t entered, std::uint64_t left, CollectiveOp op = CollectiveOp::all_reduce,
                    char state = 'S') {
  return {rank, false, state, entered, left, op};
}

TEST(DiagnoseHang, TheRankThatDidNotArriveIsBlamed) {
  const HangDiagnosis d = diagnose_hang({silent(0, 93, 92), silent(1, 92, 92), silent(2, 93, 92)});
  EXPECT_EQ(d.blamed, std::vector<int>{1});
  EXPECT_EQ(d.text, "rank 1 did not arrive at all_reduce #93 (rank 1: outside any collective, after #92); "
                    "ranks 0, 2 wait inside it");
}

TEST(DiagnoseHang, ALateRankInsideAnEarlierCollectiveIsBlamed) {
  // Rank 2 is stuck in barrier #40 (its own peer problem), ranks 0 and 1 moved on to #41.
  const HangDiagnosis d = diagnose_hang(
      {silent(0, 41, 40), silent(1, 41, 40), silent(2, 40, 39, CollectiveOp::barrier)});
  EXPECT_EQ(d.blamed, std::vector<int>{2});
  EXPECT_EQ(d.text, "rank 2 did not arrive at all_reduce #41 (rank 2: inside barrier #40); ranks 0, 1 wait inside it");
}

TEST(DiagnoseHang, StoppedRanksComeFirst) {
  const HangDiagnosis d = diagnose_hang({silent(0, 7, 6), silent(1, 7, 6, CollectiveOp::all_reduce, 'T'),
                                         silent(2, 7, 6), silent(3, 6, 6, CollectiveOp::all_reduce, 't')});
  EXPECT_EQ(d.blamed, (std::vector<int>{1, 3}));
  EXPECT_EQ(d.text, "ranks 1, 3 are stopped (process state T: SIGSTOP or a debugger); ranks 0, 2 wait inside a collective");
}

// Communicator setup goes through the controller's bootstrap all_gather, where no collective
// is counted yet: the ranks that have sent the gather wait for those that have not.
TEST(DiagnoseHang, TheRankMissingFromABootstrapAllGatherIsBlamed) {
  RankProgress a = silent(0, 0, 0), b = silent(1, 0, 0), c = silent(2, 0, 0);
  a.bootstrap_wait = c.bootstrap_wait = 5;  // all_gather #4
  HangDiagnosis d = diagnose_hang({a, b, c});
  EXPECT_EQ(d.blamed, std::vector<int>{1});
  EXPECT_EQ(d.text, "rank 1 did not send bootstrap all_gather #4; ranks 0, 2 wait for it");
  b.state = 'T';
  d = diagnose_hang({a, b, c});
  EXPECT_EQ(d.blamed, std::vector<int>{1});
  EXPECT_EQ(d.text, "rank 1 is stopped (process state T: SIGSTOP or a debugger); ranks 0, 2 wait in a bootstrap all_gather");
}

TEST(DiagnoseHang, EveryRankInsideTheSameCollectiveBlamesThemAll) {
  const HangDiagnosis d = diagnose_hang({silent(0, 5, 4), silent(1, 5, 4)});
  EXPECT_EQ(d.blamed, (std::vector<int>{0, 1}));
  EXPECT_EQ(d.text, "every silent rank waits inside all_reduce #5; no rank is behind");
}

TEST(DiagnoseHang, AnsweredRanksAreNeverBlamed) {
  // Rank 0 answered; rank 1 hangs outside any collective (computing, or in the bootstrap).
  RankProgress answered = silent(0, 3, 3);
  answered.answered = true;
  const HangDiagnosis d = diagnose_hang({answered, silent(1, 3, 3)});
  EXPECT_EQ(d.blamed, std::vector<int>{1});
  EXPECT_EQ(d.text, "no silent rank is inside a collective");
}

TEST(DiagnoseHang, NobodySilentBlamesNobody) {
  RankProgress a = silent(0, 1, 1);
  a.answered = true;
  EXPECT_TRUE(diagnose_hang({a}).blamed.empty());
}

// A backend that counts what reaches it and can be told to throw.
class FakeComm final : public Communicator {
 public:
  int calls = 0;
  bool fail = false;
  void all_reduce(const void*, void*, std::size_t, DType, void*) override { call(); }
  void all_gather(const void*, void*, std::size_t, DType, void*) override { call(); }
  void barrier() override { call(); }
  int rank() const override { return 1; }
  int size() const override { return 2; }
  std::string name() const override { return "fake"; }
  std::size_t memory_bytes() const override { return 123; }

 private:
  void call() {
    ++calls;
    if (fail) throw std::runtime_error("peer gone");
  }
};

TEST(ProgressCommunicator, CountsEveryCollectiveInAndOutAndForwardsTheRest) {
  ProgressPage page(2);
  auto inner = std::make_unique<FakeComm>();
  FakeComm* fake = inner.get();
  ProgressCommunicator comm(std::move(inner), page.slot(1));
  float x = 1;
  comm.all_reduce(&x, &x, 1, DType::f32, nullptr);
  comm.all_gather(&x, &x, 1, DType::f32, nullptr);
  comm.barrier();
  EXPECT_EQ(fake->calls, 3);
  EXPECT_EQ(page.slot(1).entered.load(), 3u);
  EXPECT_EQ(page.slot(1).left.load(), 3u);
  EXPECT_EQ(static_cast<CollectiveOp>(page.slot(1).op.load()), CollectiveOp::barrier);
  EXPECT_EQ(page.slot(0).entered.load(), 0u);  // another rank's slot is untouched
  EXPECT_EQ(comm.name(), "fake");
  EXPECT_EQ(comm.memory_bytes(), 123u);
  EXPECT_EQ(comm.rank(), 1);

  fake->fail = true;
  EXPECT_THROW(comm.all_reduce(&x, &x, 1, DType::f32, nullptr), std::runtime_error);
  EXPECT_EQ(page.slot(1).entered.load(), 4u);
  EXPECT_EQ(page.slot(1).left.load(), 4u) << "a collective that threw has been left";
}

TEST(ProcessState, ReadsThisProcessAsRunning) {
  EXPECT_EQ(process_state(static_cast<int>(getpid())), 'R');
  EXPECT_EQ(process_state(-1), '?');
}

}  // namespace
}  // namespace tpb
