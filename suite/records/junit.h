// JUnit XML for CI dashboards, in the subset of the format that Jenkins (the JUnit plugin, and
// the xUnit plugin, which validates each file against its junit-10 schema before reading it)
// and GitLab all accept: tests/data/junit/junit-subset.xsd states it, and
// tests/cli/junit_schema.sh checks what tpbench writes against it.
//
// A file is <testsuites> holding <testsuite>s; a suite holds its <properties> (name, value)
// and then its <testcase>s. Properties sit on suites, never on testcases: junit-10 rejects a
// <properties> inside a <testcase>, and xUnit then drops the whole file. So the numbers of one
// case (`tpbench run`) or one qualification row go on a suite of its own, beside the testcases
// that judge it. <testsuites> carries tests, failures, errors and time only: junit-10 has no
// skipped attribute there (each <testsuite> keeps its own).
//
// A classname is a dotted identifier (Jenkins splits it at its last dot into package and
// class, and reads spaces and brackets as part of the names); the human text stays in the
// testcase name and the suite name.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpb {

struct JunitCase {
  std::string classname;  // "tpbench.<scenario>.<case label>"; written as junit_identifier(classname)
  std::string name;       // "run", the check name, or a qualification row's item
  double time_s = 0;      // wall time, seconds
  std::string outcome;    // "pass" | "failure" | "error" | "skipped"
  std::string message;    // one line, for failure/error/skipped
  std::string detail;     // body text (stderr tail, full check detail)
};

// (name, value) pairs, written in this order.
using JunitProperties = std::vector<std::pair<std::string, std::string>>;

struct JunitSuite {
  std::string name;            // what a reader calls it: the scenario, a case's label, a row
  JunitProperties properties;  // facts and numbers of the suite (none: no <properties> element)
  std::vector<JunitCase> cases;
};

// Escapes &, <, >, " and ' and replaces characters XML 1.0 forbids (control characters
// other than tab, newline, carriage return; invalid UTF-8) with U+FFFD.
std::string xml_escape(std::string_view text);

// A dotted identifier made of [A-Za-z0-9_.-]: whitespace becomes '.', brackets ()[]{}<> are
// dropped, any other run of bytes becomes one '_' (none beside a '.'); no empty, leading or
// trailing segment ("_" when nothing is left). "allreduce tp2 64KiB bf16 shm [repeat]" ->
// "allreduce.tp2.64KiB.bf16.shm.repeat". An identifier maps to itself.
std::string junit_identifier(std::string_view text);

std::string junit_xml(const std::vector<JunitSuite>& suites);
// One suite: junit_xml({{suite_name, properties, cases}}).
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
