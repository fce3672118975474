#include "suite/runner/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

namespace tpb {

Progress::Progress(int total_cases, std::FILE* out, bool tty)
    : total_(total_cases), out_(out), tty_(tty), start_(std::chrono::steady_clock::now()) {
  if (!tty_) return;
  winsize ws{};
  if (ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    columns_ = ws.ws_col;
  } else if (const char* c = std::getenv("COLUMNS")) {
    columns_ = std::max(0, std::atoi(c));
  }
  ticker_ = std::thread([this] { tick_loop(); });
}

std::string Progress::fit_width(const std::string& line, int columns) {
  // One column is left free: a line that fills the last column wraps the cursor on some terminals.
  if (columns <= 4 || static_cast<int>(line.size()) < columns) return line;
  return line.substr(0, static_cast<std::size_t>(columns - 4)) + "...";
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void Progress::tick_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::seconds(1));
    if (!stop_ && running_) draw(running_line(), false);
  }
}

// "[i/N] <id> <label>". Built with append: `"literal" + std::string&&` trips a false
// -Wrestrict in g++ 12 at -O3.
static std::string case_head(int number, int total, const std::string& id, const std::string& label) {
  std::string head("[");
  head.append(std::to_string(number)).append("/").append(std::to_string(total)).append("] ");
  head.append(id).append(" ").append(label);
  return head;
}

std::string Progress::running_line() const {
  std::string line = case_head(index_ + 1, total_, case_id_, label_);
  line.append("  running  elapsed ").append(format_duration(elapsed_s())).append("  ").append(eta());
  return line;
}

std::string Progress::format_duration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else if (seconds < 1)
    std::snprintf(buf, sizeof buf, "%.0fms", seconds * 1000);
  else if (seconds < 10)
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::eta() const {
  if (timed_cases_ == 0) return "ETA ?";
  const int left = total_ - index_;
  return "ETA " + format_duration(timed_wall_s_ / timed_cases_ * left);
}

void Progress::draw(const std::string& line, bool permanent) {
  if (tty_) {
    // \r and erase-to-end-of-line: the line is redrawn in place. A line that will be redrawn
    // must fit on one row; one that stays may wrap.
    std::fprintf(out_, "\r\033[K%s", permanent ? line.c_str() : fit_width(line, columns_).c_str());
    if (permanent) std::fputc('\n', out_);
    line_open_ = !permanent;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void Progress::start(int index, const std::string& case_id, const std::string& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  index_ = index;
  case_id_ = case_id;
  label_ = label;
  running_ = true;
  if (!tty_) return;  // plain output: one line per case, at its end
  draw(running_line(), false);
}

void Progress::finish(const std::string& status, double wall_s, const std::string& note, const std::string& numbers) {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
  if (wall_s > 0) {
    ++timed_cases_;
    timed_wall_s_ += wall_s;
  }
  index_ += 1;
  std::string line = case_head(index_, total_, case_id_, label_);
  line.append("  ").append(status);
  if (!numbers.empty()) line.append("  ").append(numbers);
  if (wall_s > 0) line += "  (case " + format_duration(wall_s) + ")";
  line += "  elapsed " + format_duration(elapsed_s()) + "  " + eta();
  if (!note.empty()) line += "\n    " + note;
  // On a terminal, only what needs attention stays on screen: a case not ok, and an ok one
  // with a note (a failed check, allreduces that ran on another backend), which also spans
  // two lines that an in-place redraw could not erase.
  const bool permanent = !tty_ || (status != "ok" && status != "resumed") || !note.empty();
  draw(line, permanent);
}

void Progress::done() {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
  if (tty_ && line_open_) {
    std::fputc('\n', out_);
    std::fflush(out_);
    line_open_ = false;
  }
}

}  // namespace tpb
