// The measuring harness (see measure.h): the timing loop, its summary and the derived rates.
#include "suite/measure/measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "suite/measure/stats.h"
#include "tpb/bandwidth.h"
#include "tpb/check.h"
#include "tpb/test_hooks.h"

namespace tpb {

using nlohmann::json;

namespace {

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// Timed steps this process has run, across cases: the planted drift's clock.
std::int64_t g_process_timed_steps = 0;

}  // namespace

double HostTimer::time_us(const std::function<void()>& step) {
  const auto t0 = std::chrono::steady_clock::now();
  step();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

double planted_drift_ns_per_step() {
  const char* text = test_hook("TPB_TEST_PLANT_DRIFT_NS_PER_STEP");
  if (text == nullptr || *text == '\0') return 0.0;
  char* end = nullptr;
  const double ns = std::strtod(text, &end);
  TPB_INPUT_CHECK(end != text && *end == '\0' && std::isfinite(ns) && ns >= 0,
                  "TPB_TEST_PLANT_DRIFT_NS_PER_STEP: expected a number >= 0, got '" << text << "'");
  return ns;
}

Measurement measure_steps(const MeasureLoop& loop, SampleTimer& timer, Instrumentation* inst) {
  TPB_CHECK(loop.barrier && loop.step, "measure: the loop needs a barrier and a step");
  const MeasureCounts& c = loop.counts;
  TPB_CHECK(c.warmup >= 0 && c.iterations >= 1 && c.repetitions >= 1, "measure: bad counts");
  const double drift_ns = planted_drift_ns_per_step();  // read before the loop: no getenv inside it

  for (std::int64_t w = 0; w < c.warmup; ++w) loop.step(static_cast<std::uint32_t>(w));
  if (loop.after_warmup) loop.after_warmup();

  Measurement m;
  const auto per_side = static_cast<std::size_t>(c.repetitions * c.iterations);
  m.latency_us.reserve(per_side);
  if (loop.interleave) m.interleaved_off_us.reserve(per_side);
  std::uint32_t index[2] = {0, 0};  // next sample index of side A, side B
  if (inst) inst->arm();
  for (std::int64_t rep = 0; rep < c.repetitions; ++rep) {
    // ABBA: even repetitions run A first, odd ones B first.
    const bool a_first = rep % 2 == 0;
    const int halves = loop.interleave ? 2 : 1;
    for (int h = 0; h < halves; ++h) {
      const bool side_a = !loop.interleave || (h == 0) == a_first;
      if (inst && side_a) inst->resume();
      if (inst && !side_a) inst->pause();
      m.halves += side_a ? 'A' : 'B';
      std::vector<double>& out = side_a ? m.latency_us : m.interleaved_off_us;
      std::uint32_t& i = index[side_a ? 0 : 1];
      for (std::int64_t k = 0; k < c.iterations; ++k, ++i) {
        loop.barrier();  // every sample starts with all ranks present
        const double planted_us = drift_ns * 1e-3 * static_cast<double>(g_process_timed_steps);
        out.push_back(timer.time_us([&] { loop.step(i); }) + planted_us);
        ++g_process_timed_steps;
        ++m.timed_steps;
      }
    }
  }
  if (inst) inst->disarm();
  return m;
}

json StepWork::to_json() const {
  json j = json::object();
  if (bytes > 0) j.update({{"bytes_per_step", bytes}, {"bus_factor", bus_factor}});
  if (tokens > 0) j["tokens_per_step"] = tokens;
  return j;
}

StepWork StepWork::from_json(const json& j) {
  StepWork w;
  if (!j.is_object()) return w;
  if (j.contains("bytes_per_step") && j["bytes_per_step"].is_number()) w.bytes = j["bytes_per_step"].get<double>();
  if (j.contains("bus_factor") && j["bus_factor"].is_number()) w.bus_factor = j["bus_factor"].get<double>();
  if (j.contains("tokens_per_step") && j["tokens_per_step"].is_number()) w.tokens = j["tokens_per_step"].get<double>();
  return w;
}

json throughput_from_mean(const StepWork& work, double mean_us) {
  if (!(mean_us > 0) || !std::isfinite(mean_us)) return nullptr;
  const double mean_s = mean_us * 1e-6;
  if (work.bytes > 0) {
    const double algbw = algbw_GBps(work.bytes, mean_s);
    return {{"algbw_GBps", algbw},
            {"busbw_GBps", algbw * work.bus_factor},
            {"bus_factor", work.bus_factor},
            {"bytes_per_step", work.bytes},
            {"basis", "mean"}};
  }
  if (work.tokens > 0) return {{"tokens_per_s", work.tokens / mean_s}, {"tokens_per_step", work.tokens}, {"basis", "mean"}};
  return nullptr;
}

json latency_summary(const std::vector<std::vector<double>>& per_rank, int repetitions) {
  if (per_rank.empty()) return nullptr;
  std::size_t n = per_rank.front().size();
  for (const auto& r : per_rank) n = std::min(n, r.size());
  if (n == 0) return nullptr;
  // Per-iteration maximum across ranks: a tensor-parallel step ends when its slowest rank
  // does (the ranks meet at every allreduce, so their times differ by the skew only).
  std::vector<double> merged(n, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (const auto& r : per_rank) merged[i] = std::max(merged[i], r[i]);
  double sum = 0;
  for (double v : merged) sum += v;
  json lat = {{"unit", "us"},
              {"merge", "max across ranks per iteration"},
              {"samples_us", merged},
              {"count", n},
              {"p50", number_or_null(percentile(merged, 50))},
              {"p90", number_or_null(percentile(merged, 90))},
              {"p99", number_or_null(percentile(merged, 99))},
              {"mean", sum / static_cast<double>(n)},
              {"min", *std::min_element(merged.begin(), merged.end())},
              {"max", *std::max_element(merged.begin(), merged.end())}};
  // One median per repetition: the independent samples a Mann-Whitney test needs
  // (iterations within a repetition are not independent of each other).
  if (repetitions > 1 && n % static_cast<std::size_t>(repetitions) == 0) {
    const std::size_t per = n / static_cast<std::size_t>(repetitions);
    json reps = json::array();
    for (int k = 0; k < repetitions; ++k)
      reps.push_back(median(std::vector<double>(merged.begin() + static_cast<long>(k * per),
                                                merged.begin() + static_cast<long>((k + 1) * per))));
    lat["repetitions_us"] = reps;
  }
  return lat;
}

}  // namespace tpb
