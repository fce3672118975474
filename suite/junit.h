// JUnit XML for CI dashboards: one <testcase> per case x check (plus one "run" testcase per
// case for its own status), in the subset of the format that Jenkins, GitLab and GitHub
// reporters all read.
#pragma once

#include <string>
#include <string_view>
#include <utility>
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

// Suite-level <properties> (name, value), written in this order before the testcases.
using JunitProperties = std::vector<std::pair<std::string, std::string>>;

std::string junit_xml(const std::string& suite_name, const std::vector<JunitCase>& cases,
                      const JunitProperties& properties = {});

// A run or qualification in which nothing ran (exit 3) says so in its JUnit in two places:
// a suite property `tpbench.nothing_ran` (the reason; for tools that read properties) and
// this testcase, named "nothing ran", placed first, <skipped> with "nothing ran: <reason>".
// Skipped, not failure or error: nothing was judged, as ctest's SKIP_RETURN_CODE and the
// exit status say; a failure would turn every CPU-only CI job red for the GPU scenarios it
// cannot run. Jenkins, GitLab and GitHub's JUnit reporters all list skipped testcases with
// their message, and a suite property alone is shown by none of them; the named testcase is
// what a reader of the dashboard sees: zero passed, and why.
JunitCase junit_nothing_ran_case(const std::string& classname, const std::string& reason);

}  // namespace tpb
