#include "suite/records/case_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace tpb {

namespace {

using nlohmann::json;

// A number at `path` of `j` (object keys), NaN when absent or not a number.
double number_at(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return NAN;
    at = &(*at)[key];
  }
  return at->is_number() ? at->get<double>() : NAN;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Three significant figures or more: "87.6 us", "1.23 ms", "2.05 s".
std::string duration_us(double us) {
  if (!std::isfinite(us)) return "-";
  auto three = [](double v, const char* unit) {
    const int decimals = v >= 100 ? 1 : v >= 10 ? 2 : 3;
    return fixed(v, decimals) + " " + unit;
  };
  if (us < 1e3) return three(us, "us");
  if (us < 1e6) return three(us / 1e3, "ms");
  return three(us / 1e6, "s");
}

std::string gbps(double v) { return std::isfinite(v) ? fixed(v, v >= 100 ? 1 : v >= 1 || v == 0 ? 2 : 3) : "-"; }
std::string tokens_per_s(double v) { return std::isfinite(v) ? fixed(v, v >= 100 ? 0 : 1) : "-"; }

// "decode" or "prefill" for engine records, "allreduce" otherwise: the table a record goes to.
std::string table_of(const json& record) {
  const std::string workload = record.value("workload", "");
  if (workload != "engine") return workload;
  const json& params = record.contains("params") ? record["params"] : json::object();
  return params.is_object() ? params.value("mode", std::string("decode")) : "decode";
}

double weight_read_multiple(const json& record) {
  if (!record.contains("metrics") || !record["metrics"].is_array() || record["metrics"].empty()) return NAN;
  return number_at(record["metrics"][0], {"x_weight_read_time"});
}

bool has_latency(const json& record) { return std::isfinite(number_at(record, {"latency", "p50"})); }

// The step samples a record's statistics come from (latency.samples_us, else latency.count;
// NaN when the record says neither).
double sample_count(const json& record) {
  const json* lat = record.contains("latency") ? &record["latency"] : nullptr;
  if (lat == nullptr || !lat->is_object()) return NAN;
  if (lat->contains("samples_us") && (*lat)["samples_us"].is_array()) return static_cast<double>((*lat)["samples_us"].size());
  return number_at(record, {"latency", "count"});
}

// The tail statistic the samples support: the p99 of fewer than 100 samples is their maximum
// (nearest rank), so it is called that. "p99" or "max", for a set of records together (one
// statistic per column).
const char* tail_name(const std::vector<const json*>& records) {
  for (const json* r : records)
    if (sample_count(*r) < 100) return "max";
  return "p99";
}

double tail_value(const json& record, const char* name) {
  return number_at(record, {"latency", std::string(name) == "max" ? "max" : "p99"});
}

// Rows of cells; the first row is the header. Column 0 left-aligned, the others right-aligned.
std::string render(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool last = c + 1 == row.size();
      line += "  " + (c == 0 || last ? row[c] + (last ? "" : pad) : pad + row[c]);
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string case_key_numbers(const json& record) {
  if (!record.is_object() || !has_latency(record)) return "";
  const double p50 = number_at(record, {"latency", "p50"});
  const std::string table = table_of(record);
  std::string text;
  if (table == "allreduce") {
    text = "mean " + duration_us(number_at(record, {"latency", "mean"})) + "  p50 " + duration_us(p50);
    const double algbw = number_at(record, {"throughput", "algbw_GBps"});
    if (std::isfinite(algbw))
      text += "  algbw " + gbps(algbw) + " GB/s  busbw " + gbps(number_at(record, {"throughput", "busbw_GBps"})) + " GB/s";
    return text;
  }
  const char* tail = tail_name({&record});
  text = (table == "prefill" ? "TTFT p50 " : "step p50 ") + duration_us(p50) + "  " + tail + " " +
         duration_us(tail_value(record, tail));
  const double tps = number_at(record, {"throughput", "tokens_per_s"});
  // tokens/s comes from the mean step: said beside it, never beside the p50 alone.
  if (std::isfinite(tps))
    text += "  mean " + duration_us(number_at(record, {"latency", "mean"})) + " = " + tokens_per_s(tps) + " tok/s";
  const double x = weight_read_multiple(record);
  if (std::isfinite(x)) text += "  x" + fixed(x, 2) + " weight-read";
  return text;
}

std::string results_tables(const std::vector<json>& records) {
  std::map<std::string, std::vector<const json*>> by_table;
  std::vector<std::string> order;  // tables in the order their first record came
  for (const json& r : records) {
    if (!r.is_object() || !has_latency(r)) continue;
    const std::string t = table_of(r);
    if (!by_table.count(t)) order.push_back(t);
    by_table[t].push_back(&r);
  }
  std::ostringstream out;
  for (const std::string& t : order) {
    std::vector<std::vector<std::string>> rows;
    if (t == "allreduce") {
      // Explanations fit 70 columns: a narrow terminal wraps what is wider.
      out << "allreduce: mean and p50 of a step; algbw = bytes / mean time,\n"
             "  busbw = algbw x 2(n-1)/n (nccl-tests' definitions)\n";
      rows.push_back({"case", "mean", "p50", "algbw GB/s", "busbw GB/s", "status"});
      for (const json* r : by_table[t])
        rows.push_back({r->value("label", ""), duration_us(number_at(*r, {"latency", "mean"})),
                        duration_us(number_at(*r, {"latency", "p50"})), gbps(number_at(*r, {"throughput", "algbw_GBps"})),
                        gbps(number_at(*r, {"throughput", "busbw_GBps"})), r->value("status", "")});
    } else {
      const bool prefill = t == "prefill";
      const char* tail = tail_name(by_table[t]);
      out << (prefill ? "prefill: time to first token (TTFT): p50, " : "decode: one step (a token per sequence): p50, ")
          << tail << (std::string(tail) == "max" ? " (under 100 samples: no p99)" : "")
          << ", mean;\n  tokens/s = tokens / mean time\n";
      // The weight-read multiple exists for GPU decode only: its column only where a row has it.
      const bool with_x = std::any_of(by_table[t].begin(), by_table[t].end(),
                                      [](const json* r) { return std::isfinite(weight_read_multiple(*r)); });
      if (with_x) out << "  x weight-read: step p50 / the time to read the weights once\n";
      rows.push_back({"case", prefill ? "TTFT p50" : "step p50", tail, "mean", "tokens/s"});
      if (with_x) rows.back().push_back("x weight-read");
      rows.back().push_back("status");
      for (const json* r : by_table[t]) {
        const double x = weight_read_multiple(*r);
        rows.push_back({r->value("label", ""), duration_us(number_at(*r, {"latency", "p50"})),
                        duration_us(tail_value(*r, tail)), duration_us(number_at(*r, {"latency", "mean"})),
                        tokens_per_s(number_at(*r, {"throughput", "tokens_per_s"}))});
        if (with_x) rows.back().push_back(std::isfinite(x) ? fixed(x, 2) : "-");
        rows.back().push_back(r->value("status", ""));
      }
    }
    out << render(rows);
  }
  return out.str();
}

}  // namespace tpb
