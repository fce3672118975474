#include "suite/junit.h"

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

std::string junit_xml(const std::string& suite_name, const std::vector<JunitCase>& cases,
                      const JunitProperties& properties) {
  int failures = 0, errors = 0, skipped = 0;
  double total_s = 0;
  for (const auto& c : cases) {
    failures += c.outcome == "failure";
    errors += c.outcome == "error";
    skipped += c.outcome == "skipped";
    total_s += c.time_s;
  }
  char buf[64];
  auto seconds = [&](double s) {
    std::snprintf(buf, sizeof buf, "%.3f", s);
    return std::string(buf);
  };
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const std::string counts = " tests=\"" + std::to_string(cases.size()) + "\" failures=\"" + std::to_string(failures) +
                             "\" errors=\"" + std::to_string(errors) + "\" skipped=\"" + std::to_string(skipped) +
                             "\" time=\"" + seconds(total_s) + "\"";
  x += "<testsuites name=\"tpbench\"" + counts + ">\n";
  x += "  <testsuite name=\"" + xml_escape(suite_name) + "\"" + counts + ">\n";
  if (!properties.empty()) {
    x += "    <properties>\n";
    for (const auto& [name, value] : properties)
      x.append("      <property name=\"").append(xml_escape(name)).append("\" value=\"").append(xml_escape(value)).append("\"/>\n");
    x += "    </properties>\n";
  }
  for (const auto& c : cases) {
    x += "    <testcase classname=\"" + xml_escape(c.classname) + "\" name=\"" + xml_escape(c.name) + "\" time=\"" +
         seconds(c.time_s) + "\"";
    if (c.outcome == "pass") {
      x += "/>\n";
      continue;
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
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

JunitCase junit_nothing_ran_case(const std::string& classname, const std::string& reason) {
  return {classname, "nothing ran", 0.0, "skipped", "nothing ran: " + reason, ""};
}

}  // namespace tpb
