// Records survive a full disk, a crash and a second writer (issue 17, finding 5): a record
// whose write fails part-way is cut back (never half a line), a failed atomic write leaves the
// old file and no temporary, --resume's repair moves damaged lines aside, and a run folder
// has one writer. The full disk is injected with RLIMIT_FSIZE in a forked child (writes past
// the limit fail with EFBIG), which needs neither root nor a small file system.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "suite/records/results.h"
#include "tpb/check.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;

class ResultsDurability : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpb_durability_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `body` in a child whose writes past `limit_bytes` fail (EFBIG); the child's exit status:
// 0 when body returned true.
int with_file_size_limit(std::uintmax_t limit_bytes, const std::function<bool()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{static_cast<rlim_t>(limit_bytes), static_cast<rlim_t>(limit_bytes)};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    ::_exit(body() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(ResultsDurability, AFailedAppendLeavesNoPartialLine) {
  const fs::path path = dir_ / "results.jsonl";
  {
    ResultsWriter w(path.string());
    w.append({{"case_id", "a"}, {"status", "ok"}});
  }
  const std::string before = slurp(path);
  const int rc = with_file_size_limit(before.size() + 50, [&] {
    ResultsWriter w(path.string());
    try {
      w.append({{"case_id", "b"}, {"status", "ok"}, {"error", std::string(500, 'x')}});
    } catch (const std::exception& e) {
      const std::string what = e.what();
      return what.find("File too large") != std::string::npos && what.find("partial line was removed") != std::string::npos;
    }
    return false;
  });
  EXPECT_EQ(rc, 0) << "the append did not fail naming errno and the removed partial line";
  EXPECT_EQ(slurp(path), before) << "the file must end where the last whole record ended";
  int damaged = -1;
  EXPECT_EQ(read_results(path.string(), &damaged).size(), 1u);
  EXPECT_EQ(damaged, 0);
}

TEST_F(ResultsDurability, AFailedAtomicWriteLeavesTheOldFileAndNoTemporary) {
  const fs::path path = dir_ / "run.json";
  write_file_atomic(path.string(), "{\"old\": true}\n");
  const int rc = with_file_size_limit(64, [&] {
    try {
      write_file_atomic(path.string(), std::string(4096, ' ') + "{}\n");
    } catch (const std::exception& e) {
      return std::string(e.what()).find("File too large") != std::string::npos;
    }
    return false;
  });
  EXPECT_EQ(rc, 0) << "the write did not fail naming errno";
  EXPECT_EQ(slurp(path), "{\"old\": true}\n");
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename(), "run.json") << "left behind: " << entry.path();
}

TEST_F(ResultsDurability, DamagedLinesMoveAsideWholeRecordsStay) {
  const fs::path path = dir_ / "results.jsonl";
  std::ofstream(path) << "{\"case_id\": \"a\", \"status\": \"ok\"}\n{\"case_id\": \"b\", \"sta\n"
                      << "{\"case_id\": \"c\", \"status\": \"failed\"}\n";
  EXPECT_EQ(drop_damaged_lines(path.string()), 1);
  EXPECT_EQ(slurp(path), "{\"case_id\": \"a\", \"status\": \"ok\"}\n{\"case_id\": \"c\", \"status\": \"failed\"}\n");
  EXPECT_EQ(slurp(dir_ / "results.jsonl.damaged"), "{\"case_id\": \"b\", \"sta\n");
  EXPECT_EQ(drop_damaged_lines(path.string()), 0) << "a clean file is left alone";
}

TEST_F(ResultsDurability, OneWriterPerRunFolder) {
  {
    RunFolderLock first(dir_.string());
    try {
      RunFolderLock second(dir_.string());
      FAIL() << "a second writer got the lock";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("in use by another tpbench (pid " + std::to_string(::getpid()) + ")"),
                std::string::npos)
          << e.what();
    }
  }
  RunFolderLock again(dir_.string());  // released with the first
  SUCCEED();
}

}  // namespace
}  // namespace tpb
