// The built-in workloads (the table that names them is in suite/workloads/workload.cpp), and the
// pieces of the allreduce workload that tests need to recompute its inputs and outputs.
//
// "allreduce" — communicator-only: one all_reduce of params.message_bytes, timed.
//   params.message_bytes  int     message size, bytes (a multiple of the dtype's size)
//   params.dtype          string  "bf16" (default) | "f16" | "f32"
//   params.allreduce      string  backend name for make_communicator (default "shm")
//   params.seed           int     input seed (default: model.seed, else 0)
//   params.comm_max_bytes int     optional CommOptions::max_bytes (shm: slot size per rank)
//   measure.warmup / .iterations / .repetitions   untimed iterations, then repetitions x
//                         iterations timed ones (defaults 2 / 10 / 1); min_duration_s unused
//   result: latency_us (repetitions x iterations samples, microseconds, each after a
//   barrier so all ranks start together), digests.output (FNV-1a 64 of the
//   last output, hex), work {bytes_per_step, bus_factor 2(n-1)/n} (the record's throughput
//   algbw/busbw derive from it, suite/measure/measure.h), metrics {bytes, count, dtype,
//   latency_mean_us, matches_serial_sum, mismatched_elements, first_mismatch, alloc_bytes,
//   trace_file, instrumentation}, comm.
//   params.instrumentation: as the engine's (engine_workload.h); phase "allreduce"; debug: stats of a copy of the output.
//   A case of an instrumentation sweep (measure.interleave_instrumentation) on a host backend
//   measures in interleaved halves (suite/measure/measure.h): interleaved_off_latency_us beside latency_us. TEST-ONLY: TPB_TEST_PERTURB_DEBUG=1
//   makes the debug level flip one output bit, the planted fault observer_invariant catches.
//
// "probe" — TEST-ONLY, for the launcher's own tests and fault drills: a bootstrap round
//   trip with a binary payload, then an optional injected fault on one rank.
//   params.fault = {"rank": r, "kind": "crash" | "abort" | "hang" | "hang_with_child" | "stop" | "exit" | "throw",
//                   "code": exit status for "exit" (default 3),
//                   "signal": signal for "crash" (default 11, SIGSEGV),
//                   "at_collective": k: injected before the rank's k-th (0-based) shm barrier
//                   of params.collectives, while its peers wait inside it (default: after them)}
//   params.collectives = n (default 0): every rank then runs n barriers of the "shm"
//                   communicator (its peers' waits are what a hang inside a collective looks like)
//   params.shm_segment = true: rank 0 leaves /dev/shm/<group id>-probe-shm behind (as a rank
//                   killed mid-setup leaves a shm segment); metrics.shm_segment names it
//   result metrics: pid, gathered_pids (every rank's pid, via the bootstrap), payload_ok,
//   cases_served (cases this worker process has run, counting this one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/workloads/workload.h"
#include "tpb/dtype.h"

namespace tpb {

RankResult run_allreduce_workload(const CaseSpec& spec, WorkerState& state);
RankResult run_probe_workload(const CaseSpec& spec, WorkerState& state);

// Names in the workload table, for error messages.
std::vector<std::string> workload_names();

// The allreduce workload's input of `rank` of `world_size`: `count` elements of `dtype` as raw
// bytes, a pure function of (seed, rank, world_size, index), so any rank (and any test) can
// regenerate any rank's input. Up to 2 ranks: random mantissas with exponents over 2^-12..2^3,
// so that fp32 sums round and the order of summation shows. Above 2 ranks: non-zero integers,
// |x| <= 128 / world_size, so that every partial sum is exact and a ring that rounds after
// each hop must still give the serial sum bitwise (the numerics policy for TP > 2).
std::vector<unsigned char> allreduce_input(std::uint64_t seed, int rank, int world_size, std::size_t count,
                                           DType dtype);
// The spec's input seed (params.seed, else model.seed, else 0).
std::uint64_t allreduce_seed(const CaseSpec& spec);
// out[i] = fp32 sum over ranks in order 0..n-1 of inputs[r][i], rounded once to dtype.
std::vector<unsigned char> serial_sum_in_rank_order(const std::vector<std::vector<unsigned char>>& inputs,
                                                    std::size_t count, DType dtype);

}  // namespace tpb
