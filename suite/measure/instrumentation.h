// Instrumentation levels (ARCHITECTURE.md, "Observer effect"): off | timing | trace | debug | digests
// change only what is recorded, never the control flow, the allocations or the numbers.
//
// How that is made to hold, rather than hoped for:
// - Every level builds the same Instrumentation object with the same fixed-capacity mark
//   ring, allocated and zero-filled (pages touched) before the timed loop, and the
//   workload calls mark() at the same points at every level. At `off` mark() returns before
//   reading the clock; at the other levels it stores {clock, what, arg} into the next slot
//   (no formatting, no I/O, no allocation; a full ring counts drops instead of growing).
//   The clock is the TSC on x86-64 (rdtsc, ~11 ns on the 2-core CI VM against ~29 ns for
//   steady_clock's clock_gettime), converted to nanoseconds at disarm() from steady_clock
//   readings taken at arm() and disarm(); elsewhere steady_clock itself.
// - Spans, summaries, the Chrome trace file and debug statistics are built from the ring
//   and from copies after the timed loop, when the outputs are final.
// - The workload allocates its own buffers through an AllocationLedger, whose total
//   (metrics.alloc_bytes) must be equal at every level. (The process heap in use, as glibc's
//   mallinfo2 reports it, is no witness: it counts chunks parked in the thread cache as in
//   use, so it moves by a few hundred bytes between identical runs.)
// - The order of the case's communicator calls (observed_communicator.h, CallSequence) and
//   of its ledger's allocations is recorded at every level, `off` included: plain
//   bookkeeping of op, count and dtype into a buffer sized before the case, never touching
//   the data, so that observer_invariant can see a debug path that changes control flow
//   (an extra collective, an allocation moved) while leaving the outputs' digests alone.
// - A case of an instrumentation sweep measures in interleaved halves (suite/measure/measure.h): each
//   repetition is a half with marks recorded (A) and a half with recording paused (B), ABBA,
//   at every level, `off` included, so the steps, calls and allocations stay the same at every
//   level while the timing level's cost is measured within one process, on pairs that a drift
//   over the sweep affects alike.
// The observer_invariant check compares outputs, plan, both sequences and the byte counts
// across levels, and judges timing's cost on those interleaved pairs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace tpb {

// digests: timing's marks plus, around every collective, digests of its input and output and
// a sample of the output (suite/measure/tensor_digests.h): what divergence localization reruns with.
enum class InstrumentationLevel { off, timing, trace, debug, digests };

// params.instrumentation of a case_spec ("off" when absent); InputError naming the JSON
// path on anything else.
InstrumentationLevel instrumentation_level(const nlohmann::json& params);
// The level a value of params.instrumentation names (null: off); the same InputError.
InstrumentationLevel instrumentation_level_of(const nlohmann::json& value);
const char* instrumentation_level_name(InstrumentationLevel level);

// The bytes a workload allocates for one case, by purpose.
class AllocationLedger {
 public:
  void add(const std::string& what, std::size_t bytes) { items_.emplace_back(what, bytes); }
  std::size_t total_bytes() const;
  nlohmann::json to_json() const;  // {what: bytes, ...}
  // The allocations in the order they were made: {"count", "digest" (FNV-1a 64 over the
  // byte counts, hex), "first": ["<bytes> B <what>", ...] (all of them: a case makes a few)}.
  nlohmann::json sequence_json() const;

 private:
  std::vector<std::pair<std::string, std::size_t>> items_;
};

// One recorded instant: when, which workload-defined event, and an argument (e.g. a layer).
struct Mark {
  std::int64_t t_ns = 0;   // nanoseconds since the Instrumentation was built (raw clock ticks
                           // between arm() and disarm(), which converts them)
  std::uint32_t what = 0;  // workload-defined event code
  std::uint32_t arg = 0;   // workload-defined (step index, layer, ...)
};
static_assert(sizeof(Mark) == 16, "the ring's size in bytes is capacity * 16");

class Instrumentation {
 public:
  // Allocates (and zero-fills) the ring of `capacity_marks` at every level; records the
  // bytes in `ledger`.
  Instrumentation(InstrumentationLevel level, std::size_t capacity_marks, AllocationLedger& ledger);

  InstrumentationLevel level() const { return level_; }
  // Marks are stored only between arm() and disarm() (the timed loop), at level >= timing.
  // Call each once per case; disarm() turns the marks' clock ticks into nanoseconds.
  void arm();
  void disarm();
  // Between the halves of an interleaved A/B measurement (suite/measure/measure.h): pause() stops
  // storing marks, resume() stores them again (at level >= timing, while armed). Each is one
  // flag write, made between samples: mark() reads that flag at every level already, so
  // neither its cost nor its code path changes, and nothing is allocated.
  void pause() noexcept { recording_ = false; }
  void resume() noexcept { recording_ = armed_ && level_ != InstrumentationLevel::off; }
  bool recording() const noexcept { return recording_; }

  // The hot path: one branch at `off`; a clock read and a 16-byte store otherwise.
  void mark(std::uint32_t what, std::uint32_t arg = 0) noexcept {
    if (!recording_) return;
    if (count_ < capacity_)
      marks_[count_++] = Mark{static_cast<std::int64_t>(clock_ticks()), what, arg};
    else
      ++dropped_;
  }

  // The raw clock mark() reads (TSC ticks on x86-64, else steady_clock nanoseconds).
  static std::uint64_t clock_ticks() noexcept {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
  }

  const Mark* marks() const { return marks_.get(); }
  std::size_t mark_count() const { return count_; }
  std::size_t dropped() const { return dropped_; }
  std::size_t capacity() const { return capacity_; }

 private:
  std::int64_t now_ns() const noexcept;

  InstrumentationLevel level_;
  std::unique_ptr<Mark[]> marks_;
  std::size_t capacity_ = 0;
  std::size_t count_ = 0;
  std::size_t dropped_ = 0;
  bool recording_ = false;
  bool armed_ = false;          // between arm() and disarm()
  std::int64_t origin_ns_ = 0;  // steady clock at construction, nanoseconds
  std::int64_t arm_ns_ = 0;     // now_ns() at arm()
  std::uint64_t arm_ticks_ = 0; // clock_ticks() at arm()
};

// The cost of one recording mark() on this machine, nanoseconds: the minimum over 16 rounds
// of 256 clock reads + stores into a stack buffer (no allocation). Run after the timed loop at every
// level; marks per step x this / step time is the timing level's own share of a step, a
// bound that the neighbours' load on a shared machine cannot blur (observer_invariant).
double mark_cost_ns();

// A named interval built from marks after the timed loop (Chrome trace "X" event).
struct Span {
  std::string name;          // phase, e.g. "attention"
  int tid = 0;               // trace lane
  std::int64_t begin_ns = 0; // since the Instrumentation was built, nanoseconds
  std::int64_t dur_ns = 0;   // nanoseconds
  std::int64_t step = 0;     // timed step index
  std::int64_t layer = -1;   // layer index, -1 when not per layer
};

// Per phase name: mean time per step (us), share of the mean step, and span count.
// `step_span_name` names the spans that are whole steps (they are the denominator).
nlohmann::json phase_summary(const std::vector<Span>& spans, std::int64_t steps, const std::string& step_span_name);

// Writes a Chrome trace (chrome://tracing, Perfetto): {"traceEvents": [...]} with
// ph "X", ts/dur in microseconds, pid = rank, tid = span lane; plus process/thread names.
// Throws tpb::Error naming the path when it cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<Span>& spans, int rank, const std::string& label);

// Where a rank's trace goes: `trace_dir` (the case spec's, suite/scenario/case_spec.h) when
// given (created), else $TMPDIR or /tmp; the file is trace-<case_id>-rank<r>.json ("case" for a
// spec without an id).
std::string trace_path(const std::optional<std::string>& trace_dir, const std::string& case_id, int rank);

// Statistics of `n` floats for the debug level: count, nan, inf, max_abs (finite values),
// l2 norm (finite values).
nlohmann::json float_stats(const float* values, std::size_t n);

}  // namespace tpb
