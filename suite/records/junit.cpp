#include "suite/records/junit.h"

#include <cstdio>

namespace tpb {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not valid.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  std::size_t n;
  unsigned min_code;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    min_code = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    min_code = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    min_code = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  unsigned code = c & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    code = (code << 6) | (cc & 0x3F);
  }
  if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  if (code == 0xFFFE || code == 0xFFFF) return 0;  // not XML characters
  return n;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&': out += "&amp;"; ++i; continue;
      case '<': out += "&lt;"; ++i; continue;
      case '>': out += "&gt;"; ++i; continue;
      case '"': out += "&quot;"; ++i; continue;
      case '\'': out += "&apos;"; ++i; continue;
      default: break;
    }
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      out += kReplacement;
      ++i;
      continue;
    }
    const std::size_t n = utf8_length(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string junit_identifier(std::string_view text) {
  auto kept = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  };
  std::string out;
  char owed = 0;  // '.' or '_' to write before the next kept character; '.' outranks '_'
  for (const char c : text) {
    if (kept(c)) {
      if (owed != 0 && !out.empty()) out += owed;
      owed = 0;
      out += c;
    } else if (c == '.' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      owed = '.';
    } else if (std::string_view("()[]{}<>").find(c) == std::string_view::npos && owed == 0) {
      owed = '_';  // any other run of bytes (a multi-byte UTF-8 character too)
    }
  }
  return out.empty() ? "_" : out;
}

namespace {

std::string seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

struct Counts {
  std::size_t tests = 0;
  int failures = 0, errors = 0, skipped = 0;
  double time_s = 0;
  void add(const JunitCase& c) {
    ++tests;
    failures += c.outcome == "failure";
    errors += c.outcome == "error";
    skipped += c.outcome == "skipped";
    time_s += c.time_s;
  }
  void add(const Counts& o) {
    tests += o.tests;
    failures += o.failures;
    errors += o.errors;
    skipped += o.skipped;
    time_s += o.time_s;
  }
  // tests, failures, errors, then `skipped` only where the element may carry it, then time.
  std::string attributes(bool with_skipped) const {
    std::string a = " tests=\"" + std::to_string(tests) + "\" failures=\"" + std::to_string(failures) + "\" errors=\"" +
                    std::to_string(errors) + "\"";
    if (with_skipped) a += " skipped=\"" + std::to_string(skipped) + "\"";
    return a + " time=\"" + seconds(time_s) + "\"";
  }
};

void append_testcase(std::string& x, const JunitCase& c) {
  x += "    <testcase classname=\"" + junit_identifier(c.classname) + "\" name=\"" + xml_escape(c.name) + "\" time=\"" +
       seconds(c.time_s) + "\"";
  if (c.outcome == "pass") {
    x += "/>\n";
    return;
  }
  const char* tag = c.outcome == "failure" ? "failure" : c.outcome == "error" ? "error" : "skipped";
  // Appends piece by piece: `"literal" + std::string&&` trips a false -Wrestrict in g++ 12 -O3.
  x.append(">\n      <").append(tag).append(" message=\"").append(xml_escape(c.message)).append("\"");
  if (c.detail.empty()) {
    x.append("/>\n");
  } else {
    x.append(">").append(xml_escape(c.detail)).append("</").append(tag).append(">\n");
  }
  x += "    </testcase>\n";
}

void append_suite(std::string& x, const JunitSuite& suite, const Counts& counts) {
  x += "  <testsuite name=\"" + xml_escape(suite.name) + "\"" + counts.attributes(true) + ">\n";
  if (!suite.properties.empty()) {
    x += "    <properties>\n";
    for (const auto& [name, value] : suite.properties)
      x.append("      <property name=\"").append(xml_escape(name)).append("\" value=\"").append(xml_escape(value)).append("\"/>\n");
    x += "    </properties>\n";
  }
  for (const auto& c : suite.cases) append_testcase(x, c);
  x += "  </testsuite>\n";
}

}  // namespace

std::string junit_xml(const std::vector<JunitSuite>& suites) {
  std::vector<Counts> per_suite(suites.size());
  Counts total;
  for (std::size_t i = 0; i < suites.size(); ++i) {
    for (const auto& c : suites[i].cases) per_suite[i].add(c);
    total.add(per_suite[i]);
  }
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"tpbench\"" + total.attributes(false) + ">\n";
  for (std::size_t i = 0; i < suites.size(); ++i) append_suite(x, suites[i], per_suite[i]);
  x += "</testsuites>\n";
  return x;
}

std::string junit_xml(const std::string& suite_name, const std::vector<JunitCase>& cases,
                      const JunitProperties& properties) {
  return junit_xml(std::vector<JunitSuite>{{suite_name, properties, cases}});
}

JunitCase junit_nothing_ran_case(const std::string& classname, const std::string& reason) {
  return {classname, "nothing ran", 0.0, "skipped", "nothing ran: " + reason, ""};
}

}  // namespace tpb
