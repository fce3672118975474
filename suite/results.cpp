#include "suite/results.h"

#include <fcntl.h>
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

#include "tpb/check.h"

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

ResultsWriter::ResultsWriter(const std::string& path) : path_(path) {
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  TPB_CHECK(fd_ >= 0, path << ": cannot open for appending: " << std::strerror(errno));
  // A previous run that died mid-line left no newline: start on a fresh line, so that the
  // damaged line stays one (skipped) line and the next record is whole.
  const auto size = fs::file_size(path);
  if (size > 0) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(size) - 1);
    char last = '\n';
    in.get(last);
    if (last != '\n') TPB_CHECK(::write(fd_, "\n", 1) == 1, path << ": write failed: " << std::strerror(errno));
  }
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultsWriter::append(const nlohmann::json& record) {
  // error_handler::replace: a stderr tail with invalid UTF-8 must not lose the record.
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    TPB_CHECK(n > 0, path_ << ": write failed: " << std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  TPB_CHECK(::fsync(fd_) == 0, path_ << ": fsync failed: " << std::strerror(errno));
}

std::vector<nlohmann::json> read_results(const std::string& path, int* damaged_lines) {
  std::vector<nlohmann::json> records;
  if (damaged_lines) *damaged_lines = 0;
  std::ifstream in(path);
  if (!in.good()) return records;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
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
    if (r.contains("case_id") && r["case_id"].is_string() && is_final_status(r.value("status", "")))
      ids.insert(r["case_id"].get<std::string>());
  return ids;
}

std::set<std::string> failed_case_ids(const std::vector<nlohmann::json>& records) {
  std::map<std::string, std::string> last_status;
  for (const auto& r : records)
    if (r.contains("case_id") && r["case_id"].is_string() && is_final_status(r.value("status", "")))
      last_status[r["case_id"].get<std::string>()] = r["status"].get<std::string>();
  std::set<std::string> ids;
  for (const auto& [id, status] : last_status)
    if (status == "failed") ids.insert(id);
  return ids;
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TPB_CHECK(out.good(), tmp << ": cannot write");
    out << content;
    out.flush();
    TPB_CHECK(out.good(), tmp << ": write failed");
  }
  fs::rename(tmp, path);
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  TPB_INPUT_CHECK(in.good(), path << ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    TPB_INPUT_FAIL(path << ": not valid JSON: " << e.what());
  }
}

}  // namespace tpb
