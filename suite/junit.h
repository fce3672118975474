// JUnit XML for CI dashboards: one <testcase> per case x check (plus one "run" testcase per
// case for its own status), in the subset of the format that Jenkins, GitLab and GitHub
// reporters all read.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpb {

struct JunitCase {
  std::string classname;  // "<scenario>.<case label>"
  std::string name;       // "run" or the check name
  double time_s = 0;      // wall time, seconds
  std::string outcome;    // "pass" | "failure" | "error" | "skipped"
  std::string message;    // one line, for failure/error/skipped
  std::string detail;     // body text (stderr tail, full check detail)
};

// Escapes &, <, >, " and ' and replaces characters XML 1.0 forbids (control characters
// other than tab, newline, carriage return; invalid UTF-8) with U+FFFD.
std::string xml_escape(std::string_view text);

std::string junit_xml(const std::string& suite_name, const std::vector<JunitCase>& cases);

}  // namespace tpb
