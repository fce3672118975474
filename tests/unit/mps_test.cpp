// The MPS daemon lifecycle (suite/launch/mps.h) against a fake control program, CPU only: a bash
// script that behaves as nvidia-cuda-mps-control does for us. With -d it starts a "daemon"
// (a sleep loop in a session of its own, as the real daemon makes one), records its pid in
// $CUDA_MPS_PIPE_DIRECTORY/daemon.pid and creates .../control; on stdin, "quit" kills the
// daemon's process group and removes control, "get_server_list" exits 0 while it lives. Each
// test has its own mkdtemp folder (state root, pipe folders, the script), so tests can run in
// parallel; each checks the process table, not only what the library reports.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "suite/launch/mps.h"
#include "tpb/check.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The fake control program (tests/data/fake-mps-control.sh), copied beside each test's folders.
const std::string kFakeControlSource = std::string(TPB_TEST_DATA_DIR) + "/fake-mps-control.sh";

// A pid above the largest pid_max (2^22): never a live process.
constexpr int kDeadPid = 4194305;

// Alive and not a zombie.
bool alive(int pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

int read_pid(const fs::path& file) {
  std::ifstream in(file);
  int pid = 0;
  in >> pid;
  return pid;
}

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class MpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"}) {
      const char* value = std::getenv(name);
      saved_env_.push_back({name, value != nullptr, value != nullptr ? value : ""});
      unsetenv(name);
    }
    char templ[] = "/tmp/tpb-mps-test-XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr);
    root_ = templ;
    fake_ = root_ / "fake-mps-control";
    fs::copy_file(kFakeControlSource, fake_);
    fs::permissions(fake_, fs::perms::owner_all);
    options_.control_program = fake_.string();
    options_.driver_probe = "";
    options_.state_root = (root_ / "state").string();
    options_.log_dir = (root_ / "run" / "mps-log").string();
    fs::create_directories(options_.state_root);
  }

  void TearDown() override {
    for (int pid : leftovers_) {
      if (alive(pid)) kill(-pid, SIGKILL);  // fake daemons and sleep groups lead their group
      kill(pid, SIGKILL);
    }
    // The fake daemons double-fork; where this test process is a child subreaper (a Launcher
    // test earlier in the same binary made it one) their exited pieces become its zombies.
    // Reap them, or the launcher tests' "no unreaped child" checks see them when the whole
    // binary runs in one process (ctest runs each test alone).
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::error_code ec;
    fs::remove_all(root_, ec);
    for (const auto& e : saved_env_) {
      if (e.set) setenv(e.name.c_str(), e.value.c_str(), 1);
      else unsetenv(e.name.c_str());
    }
  }

  // The fake daemon serving `pipe_dir`, remembered for TearDown.
  int daemon_pid(const fs::path& pipe_dir) {
    const int pid = read_pid(pipe_dir / "daemon.pid");
    if (pid > 0) leftovers_.push_back(pid);
    return pid;
  }

  std::vector<std::string> state_folders() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(options_.state_root)) names.push_back(e.path().filename().string());
    return names;
  }

  struct SavedEnv {
    std::string name;
    bool set;
    std::string value;
  };
  std::vector<SavedEnv> saved_env_;
  fs::path root_, fake_;
  MpsOptions options_;
  std::vector<int> leftovers_;
};

TEST(MpsModeTest, ParsesTheThreeModesAndNamesABadOne) {
  EXPECT_EQ(parse_mps_mode("auto", "x"), MpsMode::automatic);
  EXPECT_EQ(parse_mps_mode("off", "x"), MpsMode::off);
  EXPECT_EQ(parse_mps_mode("require", "x"), MpsMode::require);
  EXPECT_STREQ(mps_mode_name(MpsMode::automatic), "auto");
  try {
    parse_mps_mode("always", "run: --mps");
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run: --mps"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'always'"), std::string::npos) << e.what();
  }
}

TEST_F(MpsTest, AutoStartsAPrivateDaemonAndSetsTheEnvironment) {
  MpsSession session(options_);
  const MpsStatus& st = session.status();
  ASSERT_EQ(st.state, "private") << st.detail;
  const fs::path state_dir = fs::path(options_.state_root) / ("tpbench-mps-" + std::to_string(getpid()));
  EXPECT_EQ(st.pipe_dir, (state_dir / "pipe").string());
  EXPECT_EQ(st.log_dir, options_.log_dir);
  ASSERT_NE(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), nullptr);
  EXPECT_EQ(std::string(std::getenv("CUDA_MPS_PIPE_DIRECTORY")), st.pipe_dir);
  ASSERT_NE(std::getenv("CUDA_MPS_LOG_DIRECTORY"), nullptr);
  EXPECT_EQ(std::string(std::getenv("CUDA_MPS_LOG_DIRECTORY")), options_.log_dir);
  EXPECT_TRUE(fs::is_directory(options_.log_dir));
  const int daemon = daemon_pid(st.pipe_dir);
  EXPECT_TRUE(alive(daemon)) << "pid " << daemon;
  // owner.json says who started it, and the daemon found in /proc is the fake's.
  std::ifstream in(state_dir / "owner.json");
  const json owner = json::parse(in);
  EXPECT_EQ(owner.at("controller_pid").get<int>(), getpid());
  EXPECT_GT(owner.at("controller_start_ticks").get<long long>(), 0);
  EXPECT_EQ(owner.at("daemon").at("pid").get<int>(), daemon);
  EXPECT_EQ(owner.at("daemon").at("pgid").get<int>(), daemon);  // setsid: it leads its group
  EXPECT_NE(st.detail.find("pid " + std::to_string(daemon)), std::string::npos) << st.detail;
  EXPECT_EQ(st.to_json().at("state"), "private");
}

TEST_F(MpsTest, DestructorStopsThePrivateDaemonAndRestoresTheEnvironment) {
  setenv("CUDA_MPS_LOG_DIRECTORY", "/somewhere/else", 1);
  int daemon = 0;
  fs::path state_dir;
  {
    MpsSession session(options_);
    ASSERT_EQ(session.status().state, "private") << session.status().detail;
    daemon = daemon_pid(session.status().pipe_dir);
    state_dir = fs::path(session.status().pipe_dir).parent_path();
    ASSERT_TRUE(alive(daemon));
  }
  EXPECT_FALSE(alive(daemon)) << "the fake daemon outlived the session";
  EXPECT_FALSE(fs::exists(state_dir)) << state_dir;
  EXPECT_TRUE(fs::is_directory(options_.log_dir)) << "the run's log folder is not ours to remove";
  EXPECT_EQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), nullptr);
  ASSERT_NE(std::getenv("CUDA_MPS_LOG_DIRECTORY"), nullptr);
  EXPECT_STREQ(std::getenv("CUDA_MPS_LOG_DIRECTORY"), "/somewhere/else");
  const auto calls = read_lines(root_ / "calls.log");
  EXPECT_NE(std::find(calls.begin(), calls.end(), "-d"), calls.end());
}

TEST_F(MpsTest, StopIsIdempotent) {
  MpsSession session(options_);
  ASSERT_EQ(session.status().state, "private") << session.status().detail;
  const int daemon = daemon_pid(session.status().pipe_dir);
  session.stop();
  EXPECT_FALSE(alive(daemon));
  const auto calls_after_first = read_lines(root_ / "calls.log").size();
  session.stop();
  EXPECT_EQ(read_lines(root_ / "calls.log").size(), calls_after_first) << "a second stop called the program again";
}

TEST_F(MpsTest, OffSetsNothingAndStartsNothing) {
  options_.mode = MpsMode::off;
  MpsSession session(options_);
  EXPECT_EQ(session.status().state, "off");
  EXPECT_EQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), nullptr);
  EXPECT_EQ(std::getenv("CUDA_MPS_LOG_DIRECTORY"), nullptr);
  EXPECT_TRUE(state_folders().empty());
  EXPECT_FALSE(fs::exists(root_ / "calls.log")) << "mode off ran the control program";
}

TEST_F(MpsTest, RequireWithAMissingProgramThrowsNamingIt) {
  options_.control_program = (root_ / "no-such-mps-control").string();
  options_.mode = MpsMode::require;
  try {
    MpsSession session(options_);
    FAIL() << "no InputError; state " << session.status().state;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-mps-control"), std::string::npos) << e.what();
  }
  options_.control_program = "tpb-no-such-mps-control-on-path";
  EXPECT_THROW(MpsSession session(options_), InputError);
}

TEST_F(MpsTest, AutoWithAMissingProgramIsUnavailableAndSaysWhy) {
  options_.control_program = "tpb-no-such-mps-control-on-path";
  MpsSession session(options_);
  EXPECT_EQ(session.status().state, "unavailable");
  EXPECT_NE(session.status().detail.find("tpb-no-such-mps-control-on-path not found on PATH"), std::string::npos)
      << session.status().detail;
  EXPECT_EQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), nullptr);
}

TEST_F(MpsTest, ADaemonThatFailsToStartIsUnavailableAndLeavesNothing) {
  options_.control_program = "false";  // "-d" exits 1
  MpsSession session(options_);
  EXPECT_EQ(session.status().state, "unavailable");
  EXPECT_NE(session.status().detail.find("-d exited with status 1"), std::string::npos) << session.status().detail;
  EXPECT_TRUE(state_folders().empty());
  EXPECT_EQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), nullptr);
  options_.mode = MpsMode::require;
  EXPECT_THROW(MpsSession again(options_), InputError);
  EXPECT_TRUE(state_folders().empty());
}

TEST_F(MpsTest, AReachableExternalDaemonIsUsedAndNotStopped) {
  const fs::path external = root_ / "ext";
  const MpsCommandResult started = start_mps_daemon(options_, external.string(), "");
  ASSERT_TRUE(started.ok) << started.line;
  const int daemon = daemon_pid(external);
  ASSERT_TRUE(alive(daemon));
  setenv("CUDA_MPS_PIPE_DIRECTORY", external.c_str(), 1);
  {
    MpsSession session(options_);
    EXPECT_EQ(session.status().state, "external") << session.status().detail;
    EXPECT_EQ(session.status().pipe_dir, external.string());
    EXPECT_STREQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), external.c_str());
    EXPECT_TRUE(state_folders().empty()) << "a private daemon was started beside the external one";
  }
  EXPECT_TRUE(alive(daemon)) << "the session stopped a daemon it did not start";
  EXPECT_STREQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), external.c_str());
  EXPECT_TRUE(stop_mps_daemon(options_, external.string()).ok);
  EXPECT_FALSE(alive(daemon));
  EXPECT_FALSE(fs::exists(external)) << "stop leaves the pipe folder that start created";
}

TEST_F(MpsTest, AnUnreachableConfiguredPipeFolderGetsAPrivateDaemon) {
  setenv("CUDA_MPS_PIPE_DIRECTORY", (root_ / "nothing-here").c_str(), 1);
  MpsSession session(options_);
  EXPECT_EQ(session.status().state, "private") << session.status().detail;
  daemon_pid(session.status().pipe_dir);
  EXPECT_NE(session.status().detail.find("has no reachable daemon"), std::string::npos) << session.status().detail;
  session.stop();
  EXPECT_STREQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), (root_ / "nothing-here").c_str());
}

// A CUDA_MPS_PIPE_DIRECTORY left pointing at a dead state folder of ours would send clients
// looking for a daemon that is gone: dropped. Anyone else's setting stays.
TEST_F(MpsTest, ADeadPipeFolderOfOursIsDroppedFromTheEnvironment) {
  const std::string dead = options_.state_root + "/tpbench-mps-" + std::to_string(kDeadPid) + "/pipe";
  const std::string theirs = (root_ / "theirs").string();
  options_.mode = MpsMode::off;
  setenv("CUDA_MPS_PIPE_DIRECTORY", dead.c_str(), 1);
  { MpsSession session(options_); }
  EXPECT_EQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), nullptr);
  setenv("CUDA_MPS_PIPE_DIRECTORY", theirs.c_str(), 1);
  { MpsSession session(options_); }
  EXPECT_STREQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), theirs.c_str());

  options_.mode = MpsMode::automatic;
  options_.control_program = "tpb-no-such-mps-control-on-path";  // unavailable
  setenv("CUDA_MPS_PIPE_DIRECTORY", dead.c_str(), 1);
  { MpsSession session(options_); }
  EXPECT_EQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), nullptr);

  options_.control_program = fake_.string();  // private: stop() restores the state before, less the dead entry
  setenv("CUDA_MPS_PIPE_DIRECTORY", dead.c_str(), 1);
  {
    MpsSession session(options_);
    EXPECT_EQ(session.status().state, "private") << session.status().detail;
    daemon_pid(session.status().pipe_dir);
  }
  EXPECT_EQ(std::getenv("CUDA_MPS_PIPE_DIRECTORY"), nullptr);
}

TEST_F(MpsTest, ADaemonThatIgnoresQuitIsKilled) {
  options_.timeout_s = 0.5;
  MpsSession session(options_);
  ASSERT_EQ(session.status().state, "private") << session.status().detail;
  const int daemon = daemon_pid(session.status().pipe_dir);
  std::ofstream(fs::path(session.status().pipe_dir) / "ignore-quit").put('\n');
  session.stop();
  EXPECT_FALSE(alive(daemon)) << "a daemon that ignores quit was not killed";
  const auto calls = read_lines(root_ / "calls.log");
  EXPECT_NE(std::find(calls.begin(), calls.end(), "stdin"), calls.end()) << "quit was never sent";
}

TEST_F(MpsTest, ReapsTheDaemonOfADeadOwnerOnly) {
  const fs::path state = options_.state_root;
  // A live owner: a sleeping child process.
  const pid_t owner = fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    execl("/bin/sleep", "sleep", "100", static_cast<char*>(nullptr));
    _exit(127);
  }
  leftovers_.push_back(owner);
  struct Folder {
    fs::path dir;
    int daemon;
  };
  auto make_folder = [&](const std::string& name, const json& owner_json) {
    const fs::path dir = state / name;
    const MpsCommandResult r = start_mps_daemon(options_, (dir / "pipe").string(), "");
    EXPECT_TRUE(r.ok) << r.line;
    if (!owner_json.is_null()) std::ofstream(dir / "owner.json") << owner_json.dump();
    return Folder{dir, daemon_pid(dir / "pipe")};
  };
  // Dead owner, no owner.json (a controller killed before writing it): its pipe gets quit.
  const Folder dead = make_folder("tpbench-mps-" + std::to_string(kDeadPid), nullptr);
  // Live owner: left alone.
  const Folder live = make_folder("tpbench-mps-" + std::to_string(owner), json{{"controller_pid", owner}});
  // The owner pid lives but started at another time than recorded: a recycled pid, stale.
  const Folder recycled =
      make_folder("tpbench-mps-" + std::to_string(owner) + "-1", json{{"controller_pid", owner}, {"controller_start_ticks", 1}});
  fs::create_directories(state / "tpbench-mps-notapid");
  ASSERT_TRUE(alive(dead.daemon) && alive(live.daemon) && alive(recycled.daemon));

  const auto lines = reap_stale_mps(options_);
  ASSERT_EQ(lines.size(), 2u) << (lines.empty() ? "" : lines.front());
  EXPECT_NE(lines[0].find("dead tpbench pid"), std::string::npos) << lines[0];
  EXPECT_FALSE(alive(dead.daemon));
  EXPECT_FALSE(fs::exists(dead.dir));
  EXPECT_FALSE(alive(recycled.daemon));
  EXPECT_FALSE(fs::exists(recycled.dir));
  EXPECT_TRUE(alive(live.daemon)) << "the daemon of a live controller was stopped";
  EXPECT_TRUE(fs::exists(live.dir));
  EXPECT_TRUE(fs::exists(state / "tpbench-mps-notapid"));
  EXPECT_TRUE(reap_stale_mps(options_).empty()) << "a second reap found more";
  kill(owner, SIGKILL);
  waitpid(owner, nullptr, 0);
}

TEST_F(MpsTest, ASessionReapsStaleDaemonsBeforeStartingItsOwn) {
  const fs::path dead_dir = fs::path(options_.state_root) / ("tpbench-mps-" + std::to_string(kDeadPid));
  ASSERT_TRUE(start_mps_daemon(options_, (dead_dir / "pipe").string(), "").ok);
  const int stale = daemon_pid(dead_dir / "pipe");
  MpsSession session(options_);
  EXPECT_EQ(session.status().state, "private") << session.status().detail;
  daemon_pid(session.status().pipe_dir);
  ASSERT_EQ(session.status().reaped.size(), 1u);
  EXPECT_FALSE(alive(stale));
  EXPECT_FALSE(fs::exists(dead_dir));
}

// The controller dies of SIGTERM in a child process: its rank group (a `sleep` process group)
// and its private daemon must go with it, and its exit status must still say SIGTERM.
TEST_F(MpsTest, SigtermKillsTheGroupsStopsTheDaemonAndReraises) {
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    try {
      MpsSession session(options_);
      if (session.status().state != "private") _exit(3);
      install_cleanup_signal_handlers();
      const pid_t sleeper = fork();
      if (sleeper == 0) {
        setpgid(0, 0);
        execl("/bin/sleep", "sleep", "100", static_cast<char*>(nullptr));
        _exit(127);
      }
      setpgid(sleeper, sleeper);
      register_cleanup_process_group(sleeper);
      const int pids[2] = {read_pid(fs::path(session.status().pipe_dir) / "daemon.pid"), sleeper};
      if (write(report[1], pids, sizeof pids) != static_cast<ssize_t>(sizeof pids)) _exit(4);
      raise(SIGTERM);
      _exit(5);  // not reached: the handler re-raises with the default action
    } catch (...) {
      _exit(6);
    }
  }
  close(report[1]);
  int pids[2] = {0, 0};
  const ssize_t got = read(report[0], pids, sizeof pids);
  close(report[0]);
  for (int pid : pids)
    if (pid > 0) leftovers_.push_back(pid);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  pid_t w = 0;
  while ((w = waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (w == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the controller did not die within 30 s of SIGTERM";
  }
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof pids)) << "child exit status " << status;
  ASSERT_TRUE(WIFSIGNALED(status)) << "exited with " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(alive(pids[0])) << "the private daemon outlived its controller";
  EXPECT_FALSE(alive(pids[1])) << "the registered process group outlived its controller";
  EXPECT_FALSE(fs::exists(fs::path(options_.state_root) / ("tpbench-mps-" + std::to_string(child))));
}

TEST(MpsCleanupGroupsTest, TheTableIsBoundedAndUnregisteringFreesIt) {
  EXPECT_THROW(register_cleanup_process_group(1), Error);  // never init's group
  // Made-up group ids (the handler never runs here). Others may hold entries: fill what is left.
  std::vector<int> registered;
  bool full = false;
  for (int g = 3000000; g < 3000000 + 300 && !full; ++g) {
    try {
      register_cleanup_process_group(g);
      registered.push_back(g);
    } catch (const Error&) {
      full = true;
    }
  }
  EXPECT_TRUE(full) << "300 groups registered: the table is not bounded";
  EXPECT_LE(registered.size(), 256u);
  ASSERT_FALSE(registered.empty());
  register_cleanup_process_group(registered.front());  // already there: no new entry, no throw
  unregister_cleanup_process_group(registered.front());
  EXPECT_NO_THROW(register_cleanup_process_group(2999999)) << "unregistering did not free an entry";
  unregister_cleanup_process_group(2999999);
  for (int g : registered) unregister_cleanup_process_group(g);
}

}  // namespace
}  // namespace tpb
