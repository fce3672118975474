#include "suite/records/results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "reference_engine/config/json_text.h"
#include "tpb/check.h"
#include "tpb/system_check.h"

namespace fs = std::filesystem;

namespace tpb {

std::string new_run_id() {
  // Milliseconds in the stamp: run folders sort in time order even when two runs start in
  // the same second (the random suffix only keeps them apart).
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char date[24];
  std::strftime(date, sizeof date, "%Y%m%dT%H%M%S", &tm);
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%s.%03dZ", date, static_cast<int>(ms));
  std::random_device rd;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%06x", static_cast<unsigned>(rd() & 0xffffffu));
  return std::string(stamp) + "-" + suffix;
}

namespace {

// Writes all `size` bytes at `data` to `fd`, through short writes and EINTR: 0, or the errno
// of the write that failed (EIO for one that wrote nothing), with `*written` what made it.
int write_all(int fd, const char* data, std::size_t size, std::size_t* written = nullptr) {
  std::size_t done = 0;
  int err = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (written) *written = done;
  return err;
}

// fsyncs a folder, so that a rename in it survives a crash: best effort, as some file systems
// refuse fsync on a folder.
void sync_folder(const fs::path& folder) {
  const int dir = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

ResultsWriter::ResultsWriter(const std::string& path) : path_(path) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  TPB_SYSTEM_CHECK(!ec, path << ": cannot create its folder: " << ec.message());
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  TPB_SYSTEM_CHECK(fd_ >= 0, path << ": cannot open for appending: " << std::strerror(errno));
  // A previous run that died mid-line left no newline: start on a fresh line, so that the
  // damaged line stays one (skipped) line and the next record is whole.
  const auto size = fs::file_size(path, ec);
  TPB_SYSTEM_CHECK(!ec, path << ": cannot read its size: " << ec.message());
  if (size > 0) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(size) - 1);
    char last = '\n';
    in.get(last);
    if (last != '\n') TPB_SYSTEM_CHECK(::write(fd_, "\n", 1) == 1, path << ": write failed: " << std::strerror(errno));
  }
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsWriter::append(const nlohmann::json& record) {
  // error_handler::replace: a stderr tail with invalid UTF-8 must not lose the record.
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // A record is on disk whole or not at all: a write that fails part-way (a full disk) is cut
  // back to where the line began, so the file never ends in half a record.
  const off_t start = ::lseek(fd_, 0, SEEK_END);
  TPB_SYSTEM_CHECK(start >= 0, path_ << ": cannot seek: " << std::strerror(errno));
  std::size_t done = 0;
  if (const int err = write_all(fd_, line.data(), line.size(), &done); err != 0) {
    const bool cut = ::ftruncate(fd_, start) == 0;
    TPB_SYSTEM_FAIL(path_ << ": writing a record failed after " << done << " of " << line.size()
                           << " bytes: " << std::strerror(err)
                           << (cut ? " (the partial line was removed; earlier records are intact)"
                                   : " (and removing the partial line failed too)"));
  }
  TPB_SYSTEM_CHECK(::fsync(fd_) == 0, path_ << ": fsync failed: " << std::strerror(errno));
}

namespace {

// A line of results.jsonl as --resume reads it: a JSON object (strict and bounded, json_text.h)
// whose case_id and status, where present, are strings; anything else is damaged (null).
nlohmann::json whole_record(const std::string& line) {
  JsonText j = parse_json_text(line);
  if (!j.problem.empty() || !j.value.is_object()) return nullptr;
  for (const char* key : {"case_id", "status"})
    if (j.value.contains(key) && !j.value[key].is_string()) return nullptr;
  return std::move(j.value);
}

// A record's status, "" where it has none (or, in a vector not read by read_results, not a string).
std::string status_of(const nlohmann::json& r) {
  const auto it = r.find("status");
  return it != r.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::vector<nlohmann::json> read_results(const std::string& path, int* damaged_lines) {
  std::vector<nlohmann::json> records;
  if (damaged_lines) *damaged_lines = 0;
  std::ifstream in(path);
  if (!in.good()) return records;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = whole_record(line);
    if (j.is_null()) {
      if (damaged_lines) ++*damaged_lines;
      continue;
    }
    records.push_back(std::move(j));
  }
  return records;
}

std::string results_file_of(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  const fs::path file = fs::path(path) / "results.jsonl";
  TPB_INPUT_CHECK(fs::is_regular_file(file, ec),
                  path << ": no results.jsonl in this folder (expected a run folder, <results>/<run-id>/, or a results.jsonl)");
  return file.string();
}

bool is_final_status(const std::string& status) {
  return status == "ok" || status == "infeasible" || status == "failed" || status == "skipped" || status == "fallback";
}

std::set<std::string> finished_case_ids(const std::vector<nlohmann::json>& records) {
  std::set<std::string> ids;
  for (const auto& r : records)
    if (r.contains("case_id") && r["case_id"].is_string() && is_final_status(status_of(r)))
      ids.insert(r["case_id"].get<std::string>());
  return ids;
}

std::set<std::string> failed_case_ids(const std::vector<nlohmann::json>& records) {
  std::map<std::string, std::string> last_status;
  for (const auto& r : records)
    if (r.contains("case_id") && r["case_id"].is_string() && is_final_status(status_of(r)))
      last_status[r["case_id"].get<std::string>()] = status_of(r);
  std::set<std::string> ids;
  for (const auto& [id, status] : last_status)
    if (status == "failed") ids.insert(id);
  return ids;
}

std::string write_file_atomic_or_reason(const std::string& path, const std::string& content) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) return "cannot create the folder " + parent.string() + ": " + ec.message();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // Durable: the content is fsync'ed before the rename and the folder after it, so that after
  // a crash the file is the old one or the new one, whole. Nothing is left behind on error.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::string("cannot create a file beside it: ") + std::strerror(errno);
  auto failed = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return std::string(what) + " failed: " + std::strerror(err);
  };
  if (const int err = write_all(fd, content.data(), content.size()); err != 0) return failed("write", err);
  if (::fsync(fd) != 0) return failed("fsync", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return std::string("close failed: ") + std::strerror(err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return std::string("rename failed: ") + std::strerror(err);
  }
  sync_folder(parent);
  return {};
}

void write_file_atomic(const std::string& path, const std::string& content) {
  std::error_code ec;
  const bool existed = fs::exists(path, ec);
  const std::string why = write_file_atomic_or_reason(path, content);
  TPB_SYSTEM_CHECK(why.empty(), path << ": " << why << " (" << path
                                     << (existed ? " is as it was)" : " was not written)"));
}

int drop_damaged_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return 0;
  std::string line, kept, damaged;
  int count = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (whole_record(line).is_null()) {  // the rule read_results reads by
      damaged += line + "\n";
      ++count;
    } else {
      kept += line + "\n";
    }
  }
  in.close();
  if (count == 0) return 0;
  // What is removed is kept beside it (appended: several recoveries keep all they removed).
  const std::string copy = path + ".damaged";
  const int fd = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  TPB_SYSTEM_CHECK(fd >= 0, copy << ": cannot open: " << std::strerror(errno));
  int err = write_all(fd, damaged.data(), damaged.size());
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  TPB_SYSTEM_CHECK(err == 0, copy << ": write failed: " << std::strerror(err) << " (" << path << " left as it was)");
  write_file_atomic(path, kept);
  return count;
}

RunFolderLock::RunFolderLock(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / ".tpbench.lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TPB_SYSTEM_CHECK(fd_ >= 0, path << ": cannot open: " << std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {0};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string pid = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : std::string();
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    TPB_INPUT_CHECK(err != EWOULDBLOCK,
                    run_dir << ": in use by another tpbench (" << (pid.empty() ? std::string("pid unknown") : "pid " + pid)
                            << ") writing this run; two writers would run cases twice. Wait for it, or resume later");
    TPB_SYSTEM_FAIL(path << ": cannot lock: " << std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

RunFolderLock::~RunFolderLock() {
  if (fd_ < 0) return;
  // The pid goes first, so that a later holder's message never names this finished process;
  // the file stays (removing it would race a waiter), and closing releases the lock.
  (void)!::ftruncate(fd_, 0);
  ::close(fd_);
}

nlohmann::json read_json_file(const std::string& path) { return read_json_text_file(path); }

}  // namespace tpb
