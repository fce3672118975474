// The measuring harness (suite/measure/measure.h): the order of warm-up, barriers and samples, the
// counts, the ABBA interleaving of recorded and paused halves (marks in A only, the same steps
// at every level), and the derived rates: algbw from the MEAN, busbw with nccl-tests' 2(n-1)/n.
// A scripted timer returns 1, 2, 3, ... so every sample's place is visible; no real clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "suite/scenario/case_spec.h"
#include "suite/measure/measure.h"
#include "suite/runner/case_record.h"
#include "tpb/bandwidth.h"
#include "tpb/check.h"

namespace tpb {
namespace {

using nlohmann::json;

// Runs the step, then answers the next number of 1, 2, 3, ...: sample k of the run is k.
class ScriptedTimer final : public SampleTimer {
 public:
  double time_us(const std::function<void()>& step) override {
    step();
    return ++calls;
  }
  int calls = 0;
};

// The loop's calls, in order: "w<i>" a warm-up step, "ready" after_warmup, "|" a barrier,
// "A<i>" / "B<i>" a timed step with recording on / off.
struct Script {
  std::vector<std::string> events;
  MeasureLoop loop(const MeasureCounts& counts, bool interleave, Instrumentation& inst) {
    MeasureLoop l;
    l.counts = counts;
    l.interleave = interleave;
    l.barrier = [this] { events.push_back("|"); };
    l.after_warmup = [this] { events.push_back("ready"); };
    l.step = [this, &inst](std::uint32_t i) {
      const bool timed = std::find(events.begin(), events.end(), "ready") != events.end();
      inst.mark(1, i);
      events.push_back((timed ? (inst.recording() ? "A" : "B") : "w") + std::to_string(i));
    };
    return l;
  }
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : " ") + e;
  return s;
}

TEST(Measure, WarmupThenABarrierBeforeEverySampleRepetitionsTimesIterationsInOrder) {
  AllocationLedger ledger;
  Instrumentation inst(InstrumentationLevel::timing, 64, ledger);
  Script script;
  ScriptedTimer timer;
  const Measurement m = measure_steps(script.loop({/*warmup*/ 2, /*iterations*/ 3, /*repetitions*/ 2}, false, inst), timer, &inst);
  EXPECT_EQ(joined(script.events), "w0 w1 ready | A0 | A1 | A2 | A3 | A4 | A5");
  EXPECT_EQ(m.latency_us, (std::vector<double>{1, 2, 3, 4, 5, 6}));  // in the order they ran
  EXPECT_TRUE(m.interleaved_off_us.empty());
  EXPECT_EQ(m.timed_steps, 6);
  EXPECT_EQ(m.halves, "AA");
  EXPECT_EQ(timer.calls, 6) << "warm-up steps are not timed";
  ASSERT_EQ(inst.mark_count(), 6u) << "one mark per timed step, none in the warm-up";
  for (std::uint32_t i = 0; i < 6; ++i) EXPECT_EQ(inst.marks()[i].arg, i);
  RankResult result;
  result.set_samples(m);
  const json r = result.to_json();
  EXPECT_EQ(r["latency_us"].size(), 6u);
  EXPECT_FALSE(r.contains("interleaved_off_latency_us"));
  EXPECT_FALSE(r.contains("interleaving"));
}

TEST(Measure, InterleavedHalvesRunAbbaAndMarksAreRecordedInTheAHalvesOnly) {
  AllocationLedger ledger;
  Instrumentation inst(InstrumentationLevel::timing, 64, ledger);
  Script script;
  ScriptedTimer timer;
  const Measurement m = measure_steps(script.loop({/*warmup*/ 1, /*iterations*/ 2, /*repetitions*/ 4}, true, inst), timer, &inst);
  EXPECT_EQ(m.halves, "ABBAABBA");
  EXPECT_EQ(joined(script.events),
            "w0 ready | A0 | A1 | B0 | B1 | B2 | B3 | A2 | A3 | A4 | A5 | B4 | B5 | B6 | B7 | A6 | A7");
  // Timer values 1..16 in run order: A took 1,2 then 7,8 then 9,10 then 15,16.
  EXPECT_EQ(m.latency_us, (std::vector<double>{1, 2, 7, 8, 9, 10, 15, 16}));
  EXPECT_EQ(m.interleaved_off_us, (std::vector<double>{3, 4, 5, 6, 11, 12, 13, 14}));
  EXPECT_EQ(m.timed_steps, 16);
  ASSERT_EQ(inst.mark_count(), 8u) << "marks only while recording: the A halves";
  for (std::uint32_t i = 0; i < 8; ++i) EXPECT_EQ(inst.marks()[i].arg, i);
  EXPECT_FALSE(inst.recording()) << "disarmed after the last sample";
  RankResult result;
  result.set_samples(m);
  const json r = result.to_json();
  EXPECT_EQ(r["interleaved_off_latency_us"].size(), 8u);
  EXPECT_EQ(r["interleaving"], "ABBAABBA");
}

// A linear drift (each sample 1 us slower than the one before) adds the same to both sides
// over every two repetitions: the halves' means are equal, as observer_invariant needs.
TEST(Measure, AbbaCancelsALinearDriftOverPairsOfRepetitions) {
  AllocationLedger ledger;
  Instrumentation inst(InstrumentationLevel::timing, 64, ledger);
  Script script;
  ScriptedTimer timer;  // sample k takes k us: a linear drift
  const Measurement m = measure_steps(script.loop({0, 5, 10}, true, inst), timer, &inst);
  double a = 0, b = 0;
  for (double v : m.latency_us) a += v;
  for (double v : m.interleaved_off_us) b += v;
  EXPECT_EQ(a, b);
}

TEST(Measure, AtLevelOffTheStepsAreTheSameAndNothingIsRecorded) {
  AllocationLedger ledger_off, ledger_timing;
  Instrumentation off(InstrumentationLevel::off, 64, ledger_off), timing(InstrumentationLevel::timing, 64, ledger_timing);
  Script script_off, script_timing;
  ScriptedTimer t1, t2;
  const Measurement m_off = measure_steps(script_off.loop({1, 3, 3}, true, off), t1, &off);
  const Measurement m_timing = measure_steps(script_timing.loop({1, 3, 3}, true, timing), t2, &timing);
  EXPECT_EQ(m_off.halves, m_timing.halves);
  EXPECT_EQ(m_off.timed_steps, m_timing.timed_steps);
  EXPECT_EQ(script_off.events.size(), script_timing.events.size()) << "the same steps and barriers at every level";
  EXPECT_EQ(off.mark_count(), 0u);
  EXPECT_EQ(timing.mark_count(), 9u);
  EXPECT_EQ(ledger_off.total_bytes(), ledger_timing.total_bytes());
}

TEST(Measure, WithoutInstrumentationTheLoopStillRuns) {
  ScriptedTimer timer;
  int barriers = 0, steps = 0;
  MeasureLoop loop;
  loop.counts = {1, 4, 1};
  loop.barrier = [&] { ++barriers; };
  loop.step = [&](std::uint32_t) { ++steps; };
  const Measurement m = measure_steps(loop, timer, nullptr);
  EXPECT_EQ(m.latency_us.size(), 4u);
  EXPECT_EQ(barriers, 4);
  EXPECT_EQ(steps, 5);
}

TEST(Measure, CountsComeFromTheSpecWithDefaultsAndAreChecked) {
  const auto measure = [](const json& m) { return CaseSpec::from_json({{"workload", "allreduce"}, {"measure", m}}).measure; };
  const MeasureCounts d = measure(json::object()).counts({2, 10, 1});
  EXPECT_EQ(d.warmup, 2);
  EXPECT_EQ(d.iterations, 10);
  EXPECT_EQ(d.repetitions, 1);
  const MeasureCounts c = measure({{"warmup", 0}, {"iterations", 3}, {"repetitions", 9}}).counts({2, 10, 1});
  EXPECT_EQ(c.warmup, 0);
  EXPECT_EQ(c.iterations, 3);
  EXPECT_EQ(c.repetitions, 9);
  try {
    measure({{"iterations", 0}});
    FAIL() << "iterations 0 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("case_spec.measure.iterations: expected an integer >= 1, got 0"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(measure({{"interleave_instrumentation", true}}).interleave_instrumentation);
  EXPECT_FALSE(measure({{"iterations", 2}}).interleave_instrumentation);
  EXPECT_THROW(measure({{"interleave_instrumentation", "yes"}}), InputError);
}

TEST(Measure, BusFactorIsNcclTests) {
  EXPECT_EQ(allreduce_bus_factor(1), 0.0);
  EXPECT_EQ(allreduce_bus_factor(2), 1.0);
  EXPECT_EQ(allreduce_bus_factor(4), 1.5);
  EXPECT_EQ(allreduce_bus_factor(8), 1.75);
}

// Samples 10, 10, 40 us: p50 10, mean 20. nccl-tests' algbw is bytes / the AVERAGE time.
TEST(Measure, AlgbwIsBytesOverTheMeanAndBusbwIsAlgbwTimesTwoNMinusOneOverN) {
  StepWork work;
  work.bytes = 1e6;
  work.bus_factor = allreduce_bus_factor(4);
  RankResult one_rank;
  one_rank.latency_us = {10.0, 10.0, 40.0};
  one_rank.work = work;
  const std::vector<RankResult> ranks = {one_rank, one_rank};
  const json latency = case_latency(ranks, 1);
  EXPECT_EQ(latency["p50"], 10.0);
  EXPECT_EQ(latency["mean"], 20.0);
  const json t = case_throughput(ranks, latency);
  EXPECT_DOUBLE_EQ(t["algbw_GBps"].get<double>(), 1e6 / 20e-6 / 1e9);  // 50 GB/s, not the p50's 100
  EXPECT_DOUBLE_EQ(t["busbw_GBps"].get<double>(), 50.0 * 1.5);
  EXPECT_EQ(t["basis"], "mean");
  EXPECT_FALSE(t.contains("tokens_per_s"));
  StepWork tokens;
  tokens.tokens = 8;
  const json e = throughput_from_mean(tokens, 20.0);
  EXPECT_DOUBLE_EQ(e["tokens_per_s"].get<double>(), 8 / 20e-6);
  EXPECT_EQ(e["basis"], "mean");
  EXPECT_TRUE(throughput_from_mean(StepWork{}, 20.0).is_null());
  EXPECT_TRUE(throughput_from_mean(work, 0.0).is_null());
}

TEST(Measure, CaseLatencyMergesTheInterleavedHalvesAsTheRecordedOnes) {
  // Two ranks, 2 repetitions x 2 iterations per side; the merge takes the slower rank per sample.
  RankResult r0, r1;
  r0.latency_us = {1.0, 3.0, 5.0, 7.0};
  r0.interleaved_off_latency_us = {2.0, 2.0, 9.0, 9.0};
  r0.interleaving = "ABBA";
  r1.latency_us = {2.0, 2.0, 5.0, 5.0};
  r1.interleaved_off_latency_us = {1.0, 4.0, 8.0, 8.0};
  r1.interleaving = "ABBA";
  const json lat = case_latency({r0, r1}, 2);
  EXPECT_EQ(lat["repetitions_us"], json({2.5, 6.0}));
  EXPECT_EQ(lat["interleaved_off_repetitions_us"], json({3.0, 9.0}));
  EXPECT_EQ(lat["interleaving"], "ABBA");
  RankResult plain;
  plain.latency_us = {1.0, 2.0};
  EXPECT_FALSE(case_latency({plain}, 2).contains("interleaved_off_repetitions_us"));
}

}  // namespace
}  // namespace tpb
