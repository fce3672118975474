// Records survive a full disk, a crash and a second writer (issue 17, finding 5): a record
// whose write fails part-way is cut back (never half a line), a failed atomic write leaves the
// old file and no temporary, --resume's repair moves damaged lines aside, and a run folder
// has one writer. The full disk is injected with RLIMIT_FSIZE in a forked child (writes past
// the limit fail with EFBIG), which needs neither root nor a small file system. A new run's
// folder appears with its run.json or not at all (issue 37, finding 6), and a write failure
// says what failed without a source location (finding 10).
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
#include "suite/records/run_folder.h"
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
  // The message says what became of the file and names no source file (a full disk is the
  // user's machine, not a bug in tpbench).
  const int said = with_file_size_limit(64, [&] {
    try {
      write_file_atomic(path.string(), std::string(4096, ' ') + "{}\n");
    } catch (const InputError&) {
      return false;
    } catch (const Error& e) {
      const std::string what = e.what();
      return what == path.string() + ": write failed: File too large (" + path.string() + " is as it was)" &&
             what.find(".cpp") == std::string::npos;
    }
    return false;
  });
  EXPECT_EQ(said, 0) << "the message is not the one expected";
  const int new_file = with_file_size_limit(64, [&] {
    try {
      write_file_atomic((dir_ / "new.json").string(), std::string(4096, ' ') + "{}\n");
    } catch (const Error& e) {
      return std::string(e.what()).ends_with("(" + (dir_ / "new.json").string() + " was not written)");
    }
    return false;
  });
  EXPECT_EQ(new_file, 0) << "a file that was not there must not be said to be unchanged";
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

// A new run's folder: the folder and its run.json appear together (no staging folder is left),
// or, when run.json cannot be written, nothing of the run is left and the message says so.
TEST_F(ResultsDurability, ARunFolderAppearsWithItsRunJsonOrNotAtAll) {
  const fs::path root = dir_ / "results";
  create_run_folder((root / "run-a").string(), "{\"run_id\": \"run-a\"}\n");
  EXPECT_EQ(slurp(root / "run-a" / "run.json"), "{\"run_id\": \"run-a\"}\n");
  for (const auto& entry : fs::directory_iterator(root)) EXPECT_EQ(entry.path().filename(), "run-a") << entry.path();

  const int rc = with_file_size_limit(64, [&] {
    try {
      create_run_folder((root / "run-b").string(), std::string(4096, ' ') + "{}\n");
    } catch (const InputError&) {
      return false;
    } catch (const Error& e) {
      const std::string what = e.what();
      return what.starts_with((root / "run-b" / "run.json").string() + ": cannot be written (write failed: File too large)") &&
             what.ends_with("the run was not started, and nothing of it was left in " + root.string());
    }
    return false;
  });
  EXPECT_EQ(rc, 0) << "the failure did not say what it left";
  for (const auto& entry : fs::directory_iterator(root)) EXPECT_EQ(entry.path().filename(), "run-a") << "left: " << entry.path();

  // A results root that cannot be made (a file stands where it would be): nothing made either.
  std::ofstream(dir_ / "a-file") << "x";
  try {
    create_run_folder((dir_ / "a-file" / "run-c").string(), "{}\n");
    FAIL() << "a run folder under a file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the run was not started"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(dir_ / "a-file"), "x");
}

// --resume reads run.json with its shape checked: each damage named by its JSON path.
TEST_F(ResultsDurability, ResumeReadsRunJsonWithItsShapeChecked) {
  const fs::path run = dir_ / "run";
  const nlohmann::json good = {{"run_id", "r1"},
                               {"scenario", {{"name", "s"}, {"document", nlohmann::json::object()}, {"source", "s.json"}}},
                               {"selection", nullptr},
                               {"invocation", {{"case_options", {"--placement", "shared"}}}},
                               {"provenance", {{"hosts", {{{"host_id", "h"}, {"reports", 1}}}}}},
                               {"resumed", nlohmann::json::array()},
                               {"cases", nlohmann::json::array()}};
  write_file_atomic((run / "run.json").string(), good.dump());
  EXPECT_EQ(read_run_json_for_resume(run.string()), good);
  auto refused = [&](const std::string& pointer, const nlohmann::json& value) {
    nlohmann::json bad = good;
    bad[nlohmann::json::json_pointer(pointer)] = value;
    write_file_atomic((run / "run.json").string(), bad.dump());
    try {
      read_run_json_for_resume(run.string());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string file = (run / "run.json").string();
  EXPECT_EQ(refused("/run_id", 12345), file + ": $.run_id: expected the run id (as tpbench writes it), got 12345");
  EXPECT_EQ(refused("/scenario", "x"),
            file + ": $.scenario: expected an object with the scenario's name and document (as tpbench writes it), got \"x\"");
  EXPECT_EQ(refused("/scenario/document", nlohmann::json::array()),
            file + ": $.scenario.document: expected an object (the scenario as the run read it) (as tpbench writes it), got []");
  EXPECT_EQ(refused("/selection", nlohmann::json{{"case", {1}}}),
            file + ": $.selection.case[0]: expected a string (as tpbench writes it), got 1");
  EXPECT_EQ(refused("/invocation/case_options", "--mps"),
            file + ": $.invocation.case_options: expected a list of strings (as tpbench writes it), got \"--mps\"");
  EXPECT_EQ(refused("/provenance/hosts/0", "h"),
            file + ": $.provenance.hosts[0]: expected an object with a string host_id (as tpbench writes it), got \"h\"");
  EXPECT_EQ(refused("/resumed", "x"), file + ": $.resumed: expected a list (as tpbench writes it), got \"x\"");
  // A long value is cut, its length said.
  const std::string cut = refused("/run_id", std::vector<int>(2000, 7));
  EXPECT_LT(cut.size(), 300u) << cut;
  EXPECT_NE(cut.find("... (4001 characters)"), std::string::npos) << cut;
  fs::remove(run / "run.json");
  try {
    read_run_json_for_resume(run.string());
    FAIL() << "a folder without run.json was read";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--resume " + run.string() + ": no run.json there (not a tpbench run folder)");
  }
}

}  // namespace
}  // namespace tpb
