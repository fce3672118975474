// The measuring harness: the one timing loop of every workload (STYLE.md 3, as in
// nccl-tests: the harness owns warm-up, barriers, the clock, the order of the samples, their
// summary and the derived rates; a workload supplies its setup, one step, its outputs, its
// bytes or tokens per step and its bus factor).
//
// The loop, on every rank:
//   warm-up:  counts.warmup steps, untimed, no barrier; then after_warmup() (e.g. wait for
//             the device), then Instrumentation::arm().
//   samples:  counts.repetitions repetitions of counts.iterations samples, in order; each
//             sample is barrier() (every rank starts it together) then one step timed by the
//             SampleTimer (host steady clock, or the caller's: CUDA events for the GPU engine).
//   summary:  the runner merges the ranks' samples (the slowest rank per sample: a TP step ends
//             when its slowest rank does) into percentiles and one median per repetition, the
//             independent samples a Mann-Whitney test needs (latency_summary below).
//
// Interleaved A/B (MeasureLoop::interleave): a case of an instrumentation sweep runs each
// repetition as a pair of halves of counts.iterations samples: A with the
// Instrumentation recording its marks, B with recording paused, in the order AB, BA, AB, BA,
// ... (ABBA: a drift linear in time adds as much to the A halves as to the B halves over
// every two repetitions). It does so at EVERY level, `off` included (where neither half
// records anything), so that the steps, communicator calls and allocations stay identical
// across levels (observer_invariant compares them). The samples of A are the case's latency,
// those of B `interleaved_off_latency_us`; observer_invariant judges the timing level's cost
// on these pairs, measured in one process, interleaved, never on two cases run one after the
// other (a drift over the sweep once read as a 2.4 % overhead of marks that cost 0.02 %).
// Pausing and resuming is a flag write between samples (Instrumentation::pause/resume), outside
// every timed region.
//
// The GPU allreduce's samples come from its own batched device timer (time_device_collective,
// suite/measure/allreduce_timing.cpp: barrier, one op that absorbs the ranks' launch skew,
// then events around a batch of ops); it records no marks, so it runs no B halves. Its samples
// go through the same summary and derived rates.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/measure/instrumentation.h"

namespace tpb {

// A case's counts (CaseSpec::Measure::counts fills them from the spec, suite/scenario/case_spec.h).
struct MeasureCounts {
  std::int64_t warmup = 1;       // untimed steps before the first sample, >= 0
  std::int64_t iterations = 5;   // timed samples per repetition (per half when interleaved), >= 1
  std::int64_t repetitions = 1;  // repetitions, >= 1; one median each
};

// The clock of one sample.
class SampleTimer {
 public:
  virtual ~SampleTimer() = default;
  // Runs `step` once; returns how long it took, microseconds.
  virtual double time_us(const std::function<void()>& step) = 0;
};

// std::chrono::steady_clock around the step: the whole story for host work, which is done
// when the call returns.
class HostTimer final : public SampleTimer {
 public:
  double time_us(const std::function<void()>& step) override;
};

// What a workload hands the harness.
struct MeasureLoop {
  MeasureCounts counts;
  bool interleave = false;                   // A/B halves per repetition (see the top of this file)
  std::function<void()> barrier;             // required: all ranks line up before each sample
  std::function<void(std::uint32_t)> step;   // required: one step; the argument is the sample's
                                             // index within its side (A or B), for marks;
                                             // warm-up steps get their own index
  std::function<void()> after_warmup;        // optional: before the first barrier
};

struct Measurement {
  std::vector<double> latency_us;              // A (or all) samples: repetitions x iterations, in order
  std::vector<double> interleaved_off_us;      // B samples, same shape; empty unless interleaved
  std::int64_t timed_steps = 0;                // steps run between arm() and disarm() (A + B)
  std::string halves;                          // the halves in the order they ran: "ABBAAB..."
                                               // ("A" x repetitions when not interleaved)
};

// Runs the loop; arms `inst` before the first sample and disarms it after the last (marks are
// recorded in the A halves only). `inst` may be null: a side measurement that records no marks
// (the GPU engine's allreduce share), where interleaving has nothing to pause.
Measurement measure_steps(const MeasureLoop& loop, SampleTimer& timer, Instrumentation* inst);

// What one step of a workload moves or produces, for the derived rates (the rank result's
// "work", suite/scenario/case_spec.h). A collective sets bytes and bus_factor, the engine tokens.
struct StepWork {
  double bytes = 0;       // bytes per rank per operation (allreduce: the message), 0 = none
  double bus_factor = 0;  // busbw / algbw (tpb/bandwidth.h: allreduce 2(n-1)/n)
  double tokens = 0;      // tokens per step (prefill: batch x seq_len, decode: batch), 0 = none
  nlohmann::json to_json() const;  // {bytes_per_step, bus_factor} | {tokens_per_step}
  static StepWork from_json(const nlohmann::json& j);  // {} -> nothing to derive
};

// The record's throughput, from the merged latency's MEAN as nccl-tests does (a rate is work
// over the average time of one step): {algbw_GBps, busbw_GBps, bus_factor, basis: "mean"} or
// {tokens_per_s, tokens_per_step, basis: "mean"}; null when there is nothing to derive or no
// positive mean. The one place a record's rates are computed.
nlohmann::json throughput_from_mean(const StepWork& work, double mean_us);

// The record's latency summary from each rank's samples: merged per sample by the maximum
// across ranks, then {unit, merge, samples_us, count, p50, p90, p99, mean, min, max} and, with
// repetitions > 1, repetitions_us (one median per repetition). null without samples.
nlohmann::json latency_summary(const std::vector<std::vector<double>>& samples_us_per_rank, int repetitions);

// TEST ONLY: TPB_TEST_PLANT_DRIFT_NS_PER_STEP=N (a number >= 0) adds N ns x the timed steps
// this process ran before it (across the cases of a sweep: a worker serves many) to every
// timed sample of this process: a machine that slows steadily over a sweep, the same for
// every instrumentation level, so that a later case is slower than an earlier one for no
// reason of its own (tests/cli/observer_timing_drift_is_not_instrumentation.sh). Added to
// the sample rather than spun: a spin is itself slowed by a busy runner, and then the plant
// no longer dominates the runner's noise. Unset or empty: 0, nothing planted. Never set it
// in a measurement.
double planted_drift_ns_per_step();

}  // namespace tpb
