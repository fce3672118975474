// The communicator-only workload: one all_reduce of the case's message size, timed, with
// the output checked against the spec (a serial fp32 sum in rank order, rounded once).
//
// As in nccl-tests, the workload supplies only what is particular to the collective (byte
// count, data init, bus-bandwidth factor 2(n-1)/n, the run call); the timing loop, its
// summary and algbw/busbw are the harness's (suite/measure/measure.h). GPU backends take their
// samples from the batched device timer time_device_collective.
// Inputs are a pure function of (seed, rank, index), not of the backend: every backend of a
// sweep reduces the same data, so their output digests are comparable bitwise.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>

#include "suite/measure/digest.h"
#include "suite/scenario/case_params.h"
#include "reference_engine/comm/backends.h"
#include "suite/measure/instrumentation.h"
#include "suite/measure/measure.h"
#include "suite/launch/placement.h"
#include "suite/measure/stats.h"
#include "suite/workloads/observed_communicator.h"
#include "suite/workloads/workloads.h"
#include "tpb/bandwidth.h"
#include "tpb/check.h"
#include "tpb/test_hooks.h"
#include "tpb/kernels/device.h"

#if TPB_HAVE_CUDA
#include "suite/measure/allreduce_timing.h"
#endif

namespace tpb {
namespace {

using nlohmann::json;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float load(const unsigned char* bytes, std::size_t i, DType dtype) {
  switch (dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, bytes + 4 * i, 4);
      return f;
    }
    case DType::bf16:
    case DType::f16: {
      std::uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return dtype == DType::bf16 ? bf16_to_float(h) : f16_to_float(h);
    }
  }
  return 0.0f;
}

void store(unsigned char* bytes, std::size_t i, DType dtype, float value) {
  if (dtype == DType::f32) {
    std::memcpy(bytes + 4 * i, &value, 4);
  } else {
    const std::uint16_t h = dtype == DType::bf16 ? float_to_bf16(value) : float_to_f16(value);
    std::memcpy(bytes + 2 * i, &h, 2);
  }
}

// Two marks per timed iteration, the engine's step codes (kStepBegin, kStepEnd in
// observed_communicator.h): the shm backend's copy and reduce happen inside one call and are
// not visible from here, and a mark costs ~11 ns, ~0.5 % of a 2 us small-message allreduce.
constexpr int kMarksPerStep = 2;

std::vector<Span> allreduce_spans(const Instrumentation& inst) {
  std::vector<Span> spans;
  std::int64_t step_begin = 0;
  for (std::size_t i = 0; i < inst.mark_count(); ++i) {
    const Mark& m = inst.marks()[i];
    if (m.what == kStepBegin) step_begin = m.t_ns;
    if (m.what == kStepEnd) spans.push_back(Span{"allreduce", 0, step_begin, m.t_ns - step_begin, m.arg, -1});
  }
  return spans;
}

// TEST-ONLY planted fault: with TPB_TEST_PERTURB_DEBUG=1 the debug level writes into the
// output instead of only reading its copy, so observer_invariant has something to catch
// end to end (tests/unit/observer_checks_test.cpp).
bool perturb_debug_for_tests() {
  const char* v = test_hook("TPB_TEST_PERTURB_DEBUG");
  return v && std::string(v) == "1";
}

}  // namespace

std::uint64_t allreduce_seed(const CaseSpec& spec) {
  const std::uint64_t model_seed = spec.model && spec.model->seed ? *spec.model->seed : 0;
  return static_cast<std::uint64_t>(CaseParams::from_json(spec.params).seed.get_written(static_cast<std::int64_t>(model_seed)));
}

// The inputs' kind: up to 2 ranks any value's single rounding is the serial sum's, so the
// inputs have random mantissas; above 2 ranks a ring (NCCL) rounds after every hop and
// differs from a one-rounding sum in the last bits (ARCHITECTURE.md numerics: "integer-valued
// inputs exact"), so the inputs are small non-zero integers, |x| <= 128 / ranks: every
// partial sum in any order is an integer of magnitude <= 128, exact in bf16, f16 and f32, and
// every backend must give the serial sum bitwise. Random inputs at TP > 2 are the gpu
// conformance tests' (within TP - 1 ulps).
bool integer_inputs(int world_size) { return world_size > 2; }

std::vector<unsigned char> allreduce_input(std::uint64_t seed, int rank, int world_size, std::size_t count,
                                           DType dtype) {
  const int mantissa_bits = dtype == DType::f32 ? 23 : dtype == DType::bf16 ? 7 : 10;
  const std::uint64_t stream = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(rank) + 1));
  const std::uint64_t magnitude = static_cast<std::uint64_t>(128 / std::max(world_size, 1));
  std::vector<unsigned char> bytes(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t h = splitmix64(stream + i);
    const float sign = ((h >> 63) & 1) ? -1.0f : 1.0f;
    if (integer_inputs(world_size)) {
      store(bytes.data(), i, dtype, sign * static_cast<float>(1 + h % magnitude));  // 1 .. 128 / ranks
      continue;
    }
    const float mantissa = 1.0f + static_cast<float>(h & ((1ull << mantissa_bits) - 1)) / static_cast<float>(1ull << mantissa_bits);
    const int exponent = static_cast<int>((h >> 32) % 16) - 12;  // 2^-12 .. 2^3: normal in f16 too
    store(bytes.data(), i, dtype, std::ldexp(mantissa, exponent) * sign);  // exact: the mantissa fits the dtype
  }
  return bytes;
}

std::vector<unsigned char> serial_sum_in_rank_order(const std::vector<std::vector<unsigned char>>& inputs,
                                                    std::size_t count, DType dtype) {
  TPB_CHECK(!inputs.empty(), "serial_sum_in_rank_order: no inputs");
  std::vector<unsigned char> out(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    float acc = load(inputs[0].data(), i, dtype);
    for (std::size_t r = 1; r < inputs.size(); ++r) acc += load(inputs[r].data(), i, dtype);
    store(out.data(), i, dtype, acc);
  }
  return out;
}

namespace {

// The record's instrumentation section as far as the marks give it: the timing level's own
// cost, estimated at every level (same post-loop work everywhere), the phases from timing on,
// and at trace and debug a Chrome trace (its path into `trace_file`).
json allreduce_instrumentation(const CaseSpec& spec, int rank, InstrumentationLevel level, const Instrumentation& inst,
                               const AllocationLedger& ledger, const std::vector<double>& latency_us,
                               std::int64_t timed_steps, json& trace_file) {
  const double median_step_us = latency_us.empty() ? 0.0 : median(latency_us);
  const double cost_ns = mark_cost_ns();
  json instrumentation = {{"level", instrumentation_level_name(level)},
                          {"mark_cost_ns", cost_ns},
                          {"marks_per_step", kMarksPerStep},
                          {"estimated_timing_overhead",
                           median_step_us > 0 ? json(kMarksPerStep * cost_ns * 1e-3 / median_step_us) : json(nullptr)},
                          {"marks", inst.mark_count()},
                          {"marks_dropped", inst.dropped()},
                          {"alloc", ledger.to_json()}};
  if (level != InstrumentationLevel::off) {
    const std::vector<Span> spans = allreduce_spans(inst);
    instrumentation["phases"] = phase_summary(spans, timed_steps, "allreduce");
    if (level == InstrumentationLevel::trace || level == InstrumentationLevel::debug) {
      const std::string path = trace_path(spec.trace_dir, spec.case_id, rank);
      write_chrome_trace(path, spans, rank, spec.label);
      trace_file = path;
    }
  }
  return instrumentation;
}

// The last output against the spec, bitwise: every rank's input regenerated, summed serially in
// rank order.
struct SerialSumCheck {
  std::size_t mismatched = 0;       // elements that differ
  std::int64_t first_mismatch = -1;  // the first of them; -1: none
};

SerialSumCheck check_serial_sum(std::uint64_t seed, int rank, int world_size, const std::vector<unsigned char>& input,
                                const std::vector<unsigned char>& output, std::size_t count, DType dtype) {
  const std::size_t elem = dtype_size(dtype);
  std::vector<std::vector<unsigned char>> all_inputs;
  for (int r = 0; r < world_size; ++r) all_inputs.push_back(r == rank ? input : allreduce_input(seed, r, world_size, count, dtype));
  const std::vector<unsigned char> expected = serial_sum_in_rank_order(all_inputs, count, dtype);
  SerialSumCheck check;
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(expected.data() + i * elem, output.data() + i * elem, elem) != 0) {
      if (check.first_mismatch < 0) check.first_mismatch = static_cast<std::int64_t>(i);
      ++check.mismatched;
    }
  }
  return check;
}

}  // namespace

RankResult run_allreduce_workload(const CaseSpec& spec, WorkerState& state) {
  const CaseParams params = CaseParams::from_json(spec.params);
  TPB_INPUT_CHECK(params.message_bytes.present(),
                  "case_spec.params.message_bytes: required by the allreduce workload (bytes per rank)");
  const std::int64_t message_bytes = params.message_bytes.get_written(0);
  const DType dtype = dtype_from_name(params.dtype.get_written("bf16"));
  const std::string backend = params.allreduce.get_written("shm");
  const std::string& device = spec.device;
  const MeasureCounts counts = spec.measure.counts({/*warmup*/ 2, /*iterations*/ 10, /*repetitions*/ 1});
  const std::int64_t iterations = counts.iterations, repetitions = counts.repetitions;
  const std::size_t elem = dtype_size(dtype);
  TPB_INPUT_CHECK(message_bytes > 0 && static_cast<std::size_t>(message_bytes) % elem == 0,
                  "case_spec.params.message_bytes: expected a positive multiple of " << elem << " (the size of "
                                                                                       << dtype_name(dtype) << "), got "
                                                                                       << message_bytes);
  // GPU backends run on device buffers, one process per GPU (rank r on CUDA device r), timed
  // with device events by time_device_collective (suite/measure/allreduce_timing.cpp).
  const bool on_gpu = device == "cuda";
  TPB_INPUT_CHECK(on_gpu == is_gpu_backend(backend),
                  "allreduce backend '" << backend << "' does not run on device '" << device
                                        << "' (host backends: " << backend_list(BackendDevice::host)
                                        << "; GPU backends: " << backend_list(BackendDevice::gpu) << ")");
  TPB_INPUT_CHECK(!on_gpu || TPB_HAVE_CUDA, "device cuda: this tpbench was built without CUDA");
  const bool cuda_graph = params.cuda_graph_on();
  (void)cuda_graph;  // read only in CUDA builds

  CommOptions options;
  options.max_bytes = static_cast<std::size_t>(params.comm_max_bytes.get_written(static_cast<std::int64_t>(options.max_bytes)));
  // The scenario's comm block, as the engine workload applies it (gpu_comm_options).
  if (spec.comm.custom_on_pcie) options.custom_on_pcie = *spec.comm.custom_on_pcie;
  if (spec.comm.custom_timeout_s) options.timeout_s = *spec.comm.custom_timeout_s;
  if (on_gpu) {
    options.device = rank_device_from_env(state.rank());  // the launcher's placement (suite/launch/placement.h)
  }
  Communicator& comm = state.communicator(backend, options);
  comm.reset_allreduce_calls();  // this case's calls only: the communicator outlives the case
  const int rank = state.rank();
  const int world_size = state.world_size();
  const std::size_t count = static_cast<std::size_t>(message_bytes) / elem;
  const std::uint64_t seed = allreduce_seed(spec);

  const InstrumentationLevel level = params.instrumentation_level();
  const std::vector<unsigned char> input = allreduce_input(seed, rank, world_size, count, dtype);
  std::vector<unsigned char> output(input.size());
  // Every level allocates the same: the mark ring (2 marks per timed iteration) and the
  // debug level's float copy of the output.
  AllocationLedger ledger;
  ledger.add("input", input.size());
  ledger.add("output", output.size());
  Instrumentation inst(level, static_cast<std::size_t>(std::min<std::int64_t>(kMarksPerStep * repetitions * iterations, 1 << 20)), ledger);
  std::vector<float> debug_snapshot(count, 0.0f);
  ledger.add("debug_snapshot", debug_snapshot.size() * sizeof(float));
  // The case's all_reduce calls in order (op, count, dtype), at every level, for
  // observer_invariant (observed_communicator.h): a debug path that adds or changes a call is seen.
  CallSequence calls(64);
  ledger.add("call_sequence", calls.buffer_bytes());

  // Host backends: the harness's loop (warm-up, a barrier before each sample, steady clock,
  // interleaved A/B halves in an instrumentation sweep); two marks per step, in the sample.
  // GPU backends: samples from time_device_collective's batched device timer, no marks.
  const bool interleave = !on_gpu && spec.measure.interleave_instrumentation;
  const std::int64_t samples_per_side = repetitions * iterations;
  ledger.add("latency_samples", static_cast<std::size_t>((interleave ? 2 : 1) * samples_per_side) * sizeof(double));
  Measurement measured;
#if TPB_HAVE_CUDA
  if (on_gpu) {
    DeviceTimingSpec timing;
    timing.device = options.device;
    timing.bytes = static_cast<std::size_t>(message_bytes);
    timing.warmup = static_cast<int>(counts.warmup);
    timing.samples = static_cast<int>(samples_per_side);
    timing.ops_per_sample = message_bytes <= (4 << 20) ? 20 : 2;  // batches >= ~100 us, as tpb_bench
    timing.cuda_graph = cuda_graph;
    inst.arm();
    measured.latency_us = time_device_collective(
        timing, input.data(), output.data(),
        [&](const void* in, void* out, void* stream) {
          calls.record(CallSequence::kAllReduce, count, dtype);
          comm.all_reduce(in, out, count, dtype, stream);
        },
        [&] { comm.barrier(); });
    inst.disarm();
  }
#endif
  if (!on_gpu) {
    MeasureLoop loop;
    loop.counts = counts;
    loop.interleave = interleave;
    loop.barrier = [&] { comm.barrier(); };
    loop.step = [&](std::uint32_t i) {
      inst.mark(kStepBegin, i);
      calls.record(CallSequence::kAllReduce, count, dtype);
      comm.all_reduce(input.data(), output.data(), count, dtype, nullptr);
      inst.mark(kStepEnd, i);
    };
    HostTimer timer;
    measured = measure_steps(loop, timer, &inst);
  }
  const std::vector<double>& latency_us = measured.latency_us;

  json trace_file = nullptr;
  json instrumentation = allreduce_instrumentation(spec, rank, level, inst, ledger, latency_us, repetitions * iterations,
                                                   trace_file);
  if (level == InstrumentationLevel::debug) {
    // Statistics of a copy of the final output, made after the timed loop.
    for (std::size_t i = 0; i < count; ++i) debug_snapshot[i] = load(output.data(), i, dtype);
    if (perturb_debug_for_tests()) output[0] ^= 1;  // the planted fault (see perturb_debug_for_tests)
    instrumentation["debug"] = {{"output", float_stats(debug_snapshot.data(), count)}};
  }

  const SerialSumCheck serial = check_serial_sum(seed, rank, world_size, input, output, count, dtype);

  const double mean_us = std::accumulate(latency_us.begin(), latency_us.end(), 0.0) / static_cast<double>(latency_us.size());
  // algbw and busbw are the record's throughput (suite/measure/measure.h, from the merged latency's
  // mean): the workload says what one step moves and its bus factor, nothing more.
  StepWork work;
  work.bytes = static_cast<double>(message_bytes);
  work.bus_factor = allreduce_bus_factor(world_size);
  RankResult result;
  result.set_samples(measured);
  result.work = work;
  result.digests["output"] = fnv1a64_hex(output.data(), output.size());
  result.nonfinite = nonfinite_values("output", count, [&](std::size_t i) { return load(output.data(), i, dtype); });
  result.metrics = {{"bytes", message_bytes},
                    {"count", count},
                    {"dtype", std::string(dtype_name(dtype))},
                    {"latency_mean_us", mean_us},
                    {"inputs", integer_inputs(world_size) ? "integers |x| <= 128/ranks" : "random mantissas"},
                    {"matches_serial_sum", serial.mismatched == 0},
                    {"mismatched_elements", serial.mismatched},
                    {"first_mismatch", serial.first_mismatch},
                    {"alloc_bytes", ledger.total_bytes()},
                    {"sequence", {{"communicator", calls.to_json()}, {"allocations", ledger.sequence_json()}}},
                    {"trace_file", trace_file},
                    {"instrumentation", instrumentation}};
  result.comm = communicator_result(backend, comm);
  return result;
}

}  // namespace tpb
