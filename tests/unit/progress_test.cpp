// Progress lines: plain lines off a terminal (one per case, with i/N, id, status, ETA),
// an in-place line on a terminal.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "suite/runner/progress.h"

namespace tpb {
namespace {

std::string captured(std::FILE* f) {
  std::rewind(f);
  std::string out;
  char buf[512];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST(Progress, FormatsDurations) {
  EXPECT_EQ(Progress::format_duration(0.0123), "12ms");
  EXPECT_EQ(Progress::format_duration(2.345), "2.3s");
  EXPECT_EQ(Progress::format_duration(42), "42s");
  EXPECT_EQ(Progress::format_duration(65), "1m05s");
  EXPECT_EQ(Progress::format_duration(3700), "1h01m");
}

TEST(Progress, PlainLinesOffATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(2, f, false);
    p.start(0, "00000000000000aa", "tp1 shm");
    p.finish("ok", 1.5, "");
    p.start(1, "00000000000000bb", "tp2 shm");
    p.finish("failed", 2.0, "rank 1: killed by signal 11");
    p.done();
  }
  const std::string out = captured(f);
  std::fclose(f);
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_NE(out.find("[1/2] 00000000000000aa tp1 shm  ok  (case 1.5s)"), std::string::npos) << out;
  EXPECT_NE(out.find("ETA 1.5s"), std::string::npos) << out;  // one case left at 1.5 s per case
  EXPECT_NE(out.find("[2/2] 00000000000000bb tp2 shm  failed  (case 2.0s)"), std::string::npos) << out;
  EXPECT_NE(out.find("\n    rank 1: killed by signal 11\n"), std::string::npos) << out;
}

TEST(Progress, InPlaceLineOnATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(1, f, true);
    p.start(0, "00000000000000aa", "tp1 shm");
    p.finish("ok", 0.5, "");
    p.done();
  }
  const std::string out = captured(f);
  std::fclose(f);
  EXPECT_NE(out.find("\r\033[K[1/1] 00000000000000aa tp1 shm  running"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\033[K[1/1] 00000000000000aa tp1 shm  ok  (case 500ms)"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
}

// An ok case with a note (allreduces partly on another backend, a failed check) stays on a
// terminal's screen with its note, as a case not ok does.
TEST(Progress, OkCaseWithANoteStaysOnATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(2, f, true);
    p.start(0, "00000000000000aa", "tp2 custom-oneshot");
    p.finish("ok", 0.5, "custom-oneshot requested: nccl ran 7 of 31 allreduce calls");
    p.start(1, "00000000000000bb", "tp2 nccl");
    p.finish("ok", 0.5, "");
    p.done();
  }
  const std::string out = captured(f);
  std::fclose(f);
  EXPECT_NE(out.find("tp2 custom-oneshot  ok  (case 500ms)"), std::string::npos) << out;
  EXPECT_NE(out.find("\n    custom-oneshot requested: nccl ran 7 of 31 allreduce calls\n"), std::string::npos) << out;
}

// The case's key numbers follow its status; on a terminal the line that will be redrawn is
// cut to the width ($COLUMNS when the stream is not a terminal), so that it never wraps and
// leaves a stale row behind (seen at 70 columns: 15 stale lines for 5 cases).
TEST(Progress, KeyNumbersAndALineThatFitsTheTerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  setenv("COLUMNS", "60", 1);
  {
    Progress p(1, f, true);
    p.start(0, "00000000000000aa", "allreduce tp2 64KiB bf16 shm");
    p.finish("ok", 0.5, "", "mean 12.3 us  p50 11.9 us  algbw 5.33 GB/s  busbw 5.33 GB/s");
    p.done();
  }
  unsetenv("COLUMNS");
  const std::string out = captured(f);
  std::fclose(f);
  const std::string line = out.substr(out.rfind("\r\033[K") + 4);
  EXPECT_LE(line.size(), 60u);  // 59 columns and the newline
  EXPECT_EQ(line, "[1/1] 00000000000000aa allreduce tp2 64KiB bf16 shm  ok ...\n") << out;
  EXPECT_EQ(Progress::fit_width("short", 60), "short");
  EXPECT_EQ(Progress::fit_width("0123456789", 8), "0123...");
  EXPECT_EQ(Progress::fit_width("0123456789", 0), "0123456789") << "unknown width: as is";
}

TEST(Progress, KeyNumbersStayWholeOffATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  setenv("COLUMNS", "20", 1);
  {
    Progress p(1, f, false);
    p.start(0, "00000000000000aa", "tp2 shm");
    p.finish("ok", 0.5, "", "mean 12.3 us  p50 11.9 us");
    p.done();
  }
  unsetenv("COLUMNS");
  const std::string out = captured(f);
  std::fclose(f);
  EXPECT_NE(out.find("[1/1] 00000000000000aa tp2 shm  ok  mean 12.3 us  p50 11.9 us  (case 500ms)"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace tpb
