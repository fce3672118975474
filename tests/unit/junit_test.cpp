// JUnit XML: counts, escaping, dotted classnames, suites with properties, and well-formedness
// (checked by python3's XML parser when it is installed, so that "well-formed" is not our own
// opinion; tests/cli/junit_schema.sh checks real runs' files against the schema subset).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "suite/records/junit.h"

namespace tpb {
namespace {

TEST(Junit, EscapesMarkupAndQuotes) {
  EXPECT_EQ(xml_escape("a<b>&\"c\"'d'"), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
  EXPECT_EQ(xml_escape("tab\tnl\ncr\r"), "tab\tnl\ncr\r");
  EXPECT_EQ(xml_escape("naïve µs"), "naïve µs");  // valid UTF-8 passes through
}

TEST(Junit, ReplacesWhatXmlForbids) {
  EXPECT_EQ(xml_escape(std::string("bell\x07") + "esc\x1b[0m"), "bell\xEF\xBF\xBD" "esc\xEF\xBF\xBD[0m");
  EXPECT_EQ(xml_escape(std::string("nul") + '\0' + "x"), "nul\xEF\xBF\xBDx");
  EXPECT_EQ(xml_escape("bad \xC3 utf8"), "bad \xEF\xBF\xBD utf8");
  EXPECT_EQ(xml_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate is not a character
}

std::vector<JunitCase> sample() {
  return {{"smoke.tp1 <1KiB> [0123]", "run", 0.25, "pass", "", ""},
          {"smoke.tp2 [4567]", "run", 1.5, "failure", "rank 1: killed by signal 11 (SIGSEGV)",
           "rank 1: killed by signal 11\n--- stderr ---\n\x1b[31mboom & <crash>\x1b[0m"},
          {"smoke.tp2 [4567]", "deterministic", 0, "skipped", "skipped: ran once", ""},
          {"smoke.tp4 [89ab]", "equal_across_allreduce", 0, "failure", "shm vs mpi: rank 0 differs", "detail \"quoted\""}};
}

TEST(Junit, CountsAndStructure) {
  const std::string x = junit_xml("smoke", sample());
  EXPECT_EQ(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
  // junit-10 (Jenkins' xUnit plugin) refuses `skipped` on <testsuites>; each <testsuite> has it.
  EXPECT_NE(x.find("<testsuites name=\"tpbench\" tests=\"4\" failures=\"2\" errors=\"0\" time=\"1.750\">"),
            std::string::npos) << x;
  EXPECT_NE(x.find("<testsuite name=\"smoke\" tests=\"4\" failures=\"2\" errors=\"0\" skipped=\"1\" time=\"1.750\">"),
            std::string::npos) << x;
  EXPECT_NE(x.find("classname=\"smoke.tp1.1KiB.0123\" name=\"run\" time=\"0.250\"/>"), std::string::npos) << x;
  EXPECT_NE(x.find("<failure message=\"rank 1: killed by signal 11 (SIGSEGV)\">"), std::string::npos) << x;
  EXPECT_NE(x.find("boom &amp; &lt;crash&gt;"), std::string::npos) << x;
  EXPECT_EQ(x.find('\x1b'), std::string::npos);
  EXPECT_NE(x.find("<skipped message=\"skipped: ran once\"/>"), std::string::npos) << x;
}

TEST(Junit, WellFormedForAnXmlParser) {
  if (std::system("python3 -c 'import xml.dom.minidom' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with xml.dom.minidom is not installed";
  const std::string path = (std::filesystem::temp_directory_path() / ("tpb_junit_" + std::to_string(::getpid()) + ".xml")).string();
  std::ofstream(path) << junit_xml("smoke & co", sample());
  const std::string cmd =
      "python3 -c \"import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
      "cs = d.getElementsByTagName('testcase'); assert len(cs) == 4, len(cs); "
      "assert len(d.getElementsByTagName('failure')) == 2\" " + path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "python3 could not parse " << path;
  std::filesystem::remove(path);
}

TEST(Junit, PropertiesAndTheNothingRanTestcase) {
  const std::string x = junit_xml("gpu & co", {junit_nothing_ran_case("gpu & co", "all 2 cases skipped: <no GPU>")},
                                  {{"tpbench.nothing_ran", "all 2 cases skipped: <no GPU>"}, {"tpbench.exit_code", "3"}});
  EXPECT_NE(x.find("skipped=\"1\""), std::string::npos) << x;
  const auto props = x.find("    <properties>\n      <property name=\"tpbench.nothing_ran\" value=\"all 2 cases skipped: "
                            "&lt;no GPU&gt;\"/>\n      <property name=\"tpbench.exit_code\" value=\"3\"/>\n    </properties>\n");
  ASSERT_NE(props, std::string::npos) << x;
  EXPECT_LT(props, x.find("<testcase")) << "properties come before the testcases";
  EXPECT_NE(x.find("<testcase classname=\"gpu.co\" name=\"nothing ran\" time=\"0.000\">\n"
                   "      <skipped message=\"nothing ran: all 2 cases skipped: &lt;no GPU&gt;\"/>"),
            std::string::npos) << x;
  EXPECT_EQ(junit_xml("none", {}).find("<properties>"), std::string::npos) << "no properties, no element";
}

TEST(Junit, ClassnamesAreDottedIdentifiers) {
  EXPECT_EQ(junit_identifier("allreduce tp2 64KiB bf16 shm [repeat]"), "allreduce.tp2.64KiB.bf16.shm.repeat");
  EXPECT_EQ(junit_identifier("tpbench.ci-smoke.allreduce tp2 64KiB bf16 shm [control-start]"),
            "tpbench.ci-smoke.allreduce.tp2.64KiB.bf16.shm.control-start");
  EXPECT_EQ(junit_identifier("decode tp2 b1 s64 mf0.5 instr=trace graph custom-oneshot"),
            "decode.tp2.b1.s64.mf0.5.instr_trace.graph.custom-oneshot");
  EXPECT_EQ(junit_identifier("kimi-k2.5 tp8 int4 f0.85 (catalog H200)"), "kimi-k2.5.tp8.int4.f0.85.catalog.H200");
  EXPECT_EQ(junit_identifier("gpu0->gpu1"), "gpu0-gpu1");
  EXPECT_EQ(junit_identifier("  a  ..  b  "), "a.b") << "no empty, leading or trailing segment";
  EXPECT_EQ(junit_identifier("5\xC2\xB5s & <co>"), "5_s.co") << "a run of other bytes is one '_', none beside a '.'";
  EXPECT_EQ(junit_identifier("[]"), "_");
  for (const char* id : {"tpbench.ci-smoke.allreduce.tp2", "a_b-c.d", "_"})
    EXPECT_EQ(junit_identifier(id), id) << "an identifier maps to itself";
}

// A suite per case: its properties before its testcases; the totals on <testsuites> are the
// sums over the suites.
TEST(Junit, SuitesWithProperties) {
  const std::vector<JunitSuite> suites = {
      {"allreduce tp2 4KiB bf16 shm", {{"case_id", "0123"}, {"latency_p50_us", "12.5"}},
       {{"tpbench.s.allreduce.tp2.4KiB.bf16.shm", "run", 0.5, "pass", "", ""},
        {"tpbench.s.allreduce.tp2.4KiB.bf16.shm", "matches_reference", 0, "failure", "rank 1 differs", ""}}},
      {"allreduce tp2 4KiB bf16 nccl", {}, {{"tpbench.s.allreduce.tp2.4KiB.bf16.nccl", "run", 0, "skipped", "no GPU", ""}}}};
  const std::string x = junit_xml(suites);
  EXPECT_NE(x.find("<testsuites name=\"tpbench\" tests=\"3\" failures=\"1\" errors=\"0\" time=\"0.500\">\n"
                   "  <testsuite name=\"allreduce tp2 4KiB bf16 shm\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" "
                   "time=\"0.500\">\n    <properties>\n      <property name=\"case_id\" value=\"0123\"/>\n"
                   "      <property name=\"latency_p50_us\" value=\"12.5\"/>\n    </properties>\n"
                   "    <testcase classname=\"tpbench.s.allreduce.tp2.4KiB.bf16.shm\" name=\"run\" time=\"0.500\"/>\n"),
            std::string::npos) << x;
  EXPECT_NE(x.find("  </testsuite>\n  <testsuite name=\"allreduce tp2 4KiB bf16 nccl\" tests=\"1\" failures=\"0\" "
                   "errors=\"0\" skipped=\"1\" time=\"0.000\">\n    <testcase"),
            std::string::npos) << x;
  EXPECT_EQ(x.find("<testcase classname=\"tpbench.s.allreduce.tp2.4KiB.bf16.shm\" name=\"run\" time=\"0.500\">\n      <prop"),
            std::string::npos) << "no properties inside a testcase (junit-10 refuses them)";
}

TEST(Junit, EmptySuiteIsStillValid) {
  const std::string x = junit_xml("none", {});
  EXPECT_NE(x.find("tests=\"0\""), std::string::npos);
  EXPECT_NE(x.find("</testsuites>"), std::string::npos);
}

}  // namespace
}  // namespace tpb
