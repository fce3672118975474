// Progress of a sweep: case i/N, its id and label, elapsed time and an ETA from the mean
// wall time of the cases run so far. On a terminal one line is rewritten in place (failed
// cases stay as their own lines) and redrawn every second while a case runs, so elapsed
// time moves during long cases; otherwise every case prints plain lines, for CI logs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace tpb {

class Progress {
 public:
  // `out` is where lines go; `tty` chooses the in-place line, which is cut to the terminal's
  // width (TIOCGWINSZ on `out`, else $COLUMNS): a line that wraps cannot be redrawn in place
  // and leaves its first rows behind.
  Progress(int total_cases, std::FILE* out, bool tty);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // The case about to run (index from 0).
  void start(int index, const std::string& case_id, const std::string& label);
  // Its outcome: status (ok/failed/skipped/...), wall seconds (0 for cases not run), one-line
  // note, and the case's key numbers (suite/records/case_summary.h), printed after the status.
  void finish(const std::string& status, double wall_s, const std::string& note, const std::string& numbers = "");
  // Ends the in-place line.
  void done();

  // The pieces, testable: "1m05s", "ETA 30s"; a line cut to `columns` (0: as is), ending in
  // "..." where it was cut.
  static std::string format_duration(double seconds);
  static std::string fit_width(const std::string& line, int columns);

 private:
  void draw(const std::string& line, bool permanent);
  std::string running_line() const;
  void tick_loop();
  double elapsed_s() const;
  std::string eta() const;

  int total_;
  std::FILE* out_;
  bool tty_;
  int columns_ = 0;  // the terminal's width; 0 when unknown
  int index_ = 0;
  std::string case_id_, label_;
  int timed_cases_ = 0;     // cases that ran (not skipped, not resumed)
  double timed_wall_s_ = 0; // their wall time, seconds
  bool line_open_ = false;
  bool running_ = false;     // a case has started and not finished
  bool stop_ = false;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;          // guards everything above against the ticker thread
  std::condition_variable wake_;
  std::thread ticker_;        // tty only: redraws the running line every second
};

}  // namespace tpb
