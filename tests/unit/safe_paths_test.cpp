// Names that become file names and paths that must stay under their folder (issue 17).
#include <gtest/gtest.h>

#include <string>

#include "suite/records/safe_paths.h"
#include "tpb/check.h"

namespace tpb {
namespace {

TEST(SafePaths, NamesAreASafeCharacterSet) {
  for (const char* ok : {"ci-smoke", "gpu-engine-shared", "a.b_c-9", "x"}) EXPECT_EQ(safe_name_problem(ok), "") << ok;
  EXPECT_EQ(safe_name_problem(""), "empty");
  EXPECT_EQ(safe_name_problem("../../escaped"), "starts with '.'");
  EXPECT_EQ(safe_name_problem("a/b"), "contains '/' (allowed: letters, digits, '.', '_', '-')");
  EXPECT_EQ(safe_name_problem(std::string("a\0b", 3)), "contains byte 0x00 (allowed: letters, digits, '.', '_', '-')");
  EXPECT_EQ(safe_name_problem("a b"), "contains byte 0x20 (allowed: letters, digits, '.', '_', '-')");
  EXPECT_EQ(safe_name_problem(std::string(kMaxSafeNameLength, 'x')), "");
  EXPECT_NE(safe_name_problem(std::string(kMaxSafeNameLength + 1, 'x')).find("longer than 128"), std::string::npos);
}

TEST(SafePaths, PathUnderStaysUnder) {
  EXPECT_EQ(path_under("bl", "cpu-ref/x.jsonl", "baseline file").string(), "bl/cpu-ref/x.jsonl");
  EXPECT_EQ(path_under("bl", "a/./b/../c.jsonl", "baseline file").string(), "bl/a/c.jsonl");
  EXPECT_THROW(path_under("bl", "cpu-ref/../../x.jsonl", "baseline file"), InputError);
  EXPECT_THROW(path_under("bl", "/etc/x", "baseline file"), InputError);
  EXPECT_THROW(path_under("bl", "", "baseline file"), InputError);
}

}  // namespace
}  // namespace tpb
