#include "suite/measure/instrumentation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "suite/measure/digest.h"
#include "tpb/check.h"
#include "tpb/fnv1a.h"
#include "tpb/message_text.h"
#include "tpb/system_check.h"

namespace tpb {

namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

InstrumentationLevel instrumentation_level(const nlohmann::json& params) {
  if (!params.is_object() || !params.contains("instrumentation")) return InstrumentationLevel::off;
  return instrumentation_level_of(params["instrumentation"]);
}

InstrumentationLevel instrumentation_level_of(const nlohmann::json& v) {
  if (v.is_null()) return InstrumentationLevel::off;
  const std::string name = v.is_string() ? v.get<std::string>() : v.dump();
  if (name == "off") return InstrumentationLevel::off;
  if (name == "timing") return InstrumentationLevel::timing;
  if (name == "trace") return InstrumentationLevel::trace;
  if (name == "debug") return InstrumentationLevel::debug;
  if (name == "digests") return InstrumentationLevel::digests;
  TPB_INPUT_FAIL("case_spec.params.instrumentation: expected \"off\", \"timing\", \"trace\", \"debug\" or \"digests\", got "
                 << cut_for_message(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

const char* instrumentation_level_name(InstrumentationLevel level) {
  switch (level) {
    case InstrumentationLevel::off: return "off";
    case InstrumentationLevel::timing: return "timing";
    case InstrumentationLevel::trace: return "trace";
    case InstrumentationLevel::debug: return "debug";
    case InstrumentationLevel::digests: return "digests";
  }
  return "?";
}

std::size_t AllocationLedger::total_bytes() const {
  std::size_t total = 0;
  for (const auto& item : items_) total += item.second;
  return total;
}

nlohmann::json AllocationLedger::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [what, bytes] : items_) j[what] = j.value(what, std::size_t{0}) + bytes;
  return j;
}

nlohmann::json AllocationLedger::sequence_json() const {
  std::uint64_t digest = kFnv1a64Basis;  // over the byte counts in order, each as 8 bytes little-endian
  nlohmann::json first = nlohmann::json::array();
  for (const auto& [what, bytes] : items_) {
    const std::uint64_t b = bytes;
    for (int i = 0; i < 8; ++i) digest = fnv1a64_step(digest, static_cast<std::uint8_t>(b >> (8 * i)));
    first.push_back(std::to_string(bytes) + " B " + what);
  }
  return {{"count", items_.size()}, {"digest", digest_hex(digest)}, {"first", first}};
}

Instrumentation::Instrumentation(InstrumentationLevel level, std::size_t capacity_marks, AllocationLedger& ledger)
    : level_(level),
      marks_(std::make_unique<Mark[]>(capacity_marks)),  // value-initialised: every page written, at every level
      capacity_(capacity_marks),
      origin_ns_(steady_ns()) {
  ledger.add("instrumentation_ring", capacity_marks * sizeof(Mark));
}

std::int64_t Instrumentation::now_ns() const noexcept { return steady_ns() - origin_ns_; }

void Instrumentation::arm() {
  arm_ns_ = now_ns();
  arm_ticks_ = clock_ticks();
  armed_ = true;
  recording_ = level_ != InstrumentationLevel::off;
}

void Instrumentation::disarm() {
  recording_ = false;
  armed_ = false;
  const std::uint64_t end_ticks = clock_ticks();
  const std::int64_t end_ns = now_ns();
  // Linear map ticks -> ns over the armed window (the TSC rate is constant: constant_tsc).
  const double ticks = static_cast<double>(end_ticks - arm_ticks_);
  const double ns_per_tick = ticks > 0 ? static_cast<double>(end_ns - arm_ns_) / ticks : 1.0;
  for (std::size_t i = 0; i < count_; ++i) {
    const double dt = static_cast<double>(static_cast<std::uint64_t>(marks_[i].t_ns) - arm_ticks_);
    marks_[i].t_ns = arm_ns_ + static_cast<std::int64_t>(dt * ns_per_tick);
  }
}

double mark_cost_ns() {
  constexpr int kRounds = 16, kMarks = 256;
  Mark scratch[kMarks];
  double best_ns = 1e300;
  for (int round = 0; round < kRounds; ++round) {
    const std::int64_t t0 = steady_ns();
    for (int i = 0; i < kMarks; ++i)
      scratch[i] = Mark{static_cast<std::int64_t>(Instrumentation::clock_ticks()), static_cast<std::uint32_t>(i), 0};
    const std::int64_t t1 = steady_ns();
    // Keep the stores: the sum depends on every slot.
    std::int64_t sink = 0;
    for (const Mark& m : scratch) sink += m.t_ns & 1;
    best_ns = std::min(best_ns, static_cast<double>(t1 - t0 + (sink < 0)) / kMarks);
  }
  return best_ns;
}

nlohmann::json phase_summary(const std::vector<Span>& spans, std::int64_t steps, const std::string& step_span_name) {
  std::map<std::string, std::pair<double, std::int64_t>> by_name;  // name -> (total ns, count)
  for (const auto& s : spans) {
    auto& e = by_name[s.name];
    e.first += static_cast<double>(s.dur_ns);
    ++e.second;
  }
  const double per = steps > 0 ? static_cast<double>(steps) : 1.0;
  const auto step_it = by_name.find(step_span_name);
  const double step_ns = step_it == by_name.end() ? 0.0 : step_it->second.first / per;
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, e] : by_name) {
    const double mean_ns = e.first / per;
    out[name] = {{"per_step_us", mean_ns * 1e-3},
                 {"share_of_step", step_ns > 0 ? nlohmann::json(mean_ns / step_ns) : nlohmann::json(nullptr)},
                 {"count", e.second}};
  }
  return out;
}

void write_chrome_trace(const std::string& path, const std::vector<Span>& spans, int rank, const std::string& label) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0},
                    {"args", {{"name", "rank " + std::to_string(rank) + (label.empty() ? "" : " " + label)}}}});
  std::map<int, bool> lanes;
  for (const auto& s : spans) {
    lanes[s.tid] = true;
    nlohmann::json args = {{"step", s.step}};
    if (s.layer >= 0) args["layer"] = s.layer;
    events.push_back({{"name", s.name}, {"ph", "X"}, {"pid", rank}, {"tid", s.tid},
                      {"ts", static_cast<double>(s.begin_ns) * 1e-3}, {"dur", static_cast<double>(s.dur_ns) * 1e-3},
                      {"args", args}});
  }
  for (const auto& [tid, unused] : lanes) {
    (void)unused;
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", tid},
                      {"args", {{"name", tid == 0 ? "steps" : "phases"}}}});
  }
  const nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
  std::ofstream out(path);
  TPB_SYSTEM_CHECK(out.good(), "trace: cannot write '" << path << "'");
  out << doc.dump() << "\n";
  out.close();
  TPB_SYSTEM_CHECK(out.good(), "trace: writing '" << path << "' failed");
}

std::string trace_path(const std::optional<std::string>& trace_dir, const std::string& case_id, int rank) {
  std::string dir;
  if (trace_dir) {
    dir = *trace_dir;
  } else {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp && *tmp ? tmp : "/tmp";
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TPB_SYSTEM_CHECK(!ec, "trace: cannot create folder '" << dir << "' (case_spec.trace_dir): " << ec.message());
  const std::string id = case_id.empty() ? "case" : case_id;
  return (std::filesystem::path(dir) / ("trace-" + id + "-rank" + std::to_string(rank) + ".json")).string();
}

nlohmann::json float_stats(const float* values, std::size_t n) {
  std::size_t nan = 0, inf = 0;
  double max_abs = 0, sum_sq = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = values[i];
    if (std::isnan(v)) {
      ++nan;
    } else if (std::isinf(v)) {
      ++inf;
    } else {
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
      sum_sq += static_cast<double>(v) * v;
    }
  }
  return {{"count", n}, {"nan", nan}, {"inf", inf}, {"max_abs", max_abs}, {"l2", std::sqrt(sum_sq)}};
}

}  // namespace tpb
