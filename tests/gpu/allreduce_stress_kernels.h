// Device-side inputs and checks for the custom allreduce's stress tests
// (allreduce_stress_test.cpp): 10^5 calls cannot each go through the host, so every rank fills
// its input on the device from (seed, rank) and checks the output on the device against the
// exact sum (small integers in bf16: every order of summation gives the same bits), counting
// wrong elements and NaNs into device counters the test reads once at the end.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpb::test {

// Counters the check kernels add to (device memory).
struct StressCounters {
  unsigned long long checked;  // elements compared
  unsigned long long wrong;    // elements that are neither the sum nor NaN
  unsigned long long nan;      // NaN elements (a failed call's output)
  unsigned long long first_wrong_call;  // the call index of the first wrong element + 1 (0: none)
};

// in[i] = bf16(value(seed, rank, i)) for i < count, on `stream`.
void stress_fill(void* in, std::size_t count, std::uint32_t seed, int rank, void* stream);
// Compares out[0..count) with the sum over ranks 0..world-1 of value(seed, r, i); `call`
// names the call in first_wrong_call.
void stress_check(const void* out, std::size_t count, std::uint32_t seed, int world, std::uint64_t call,
                  StressCounters* counters, void* stream);
// Holds `sms` multiprocessors (one resident block of 1024 threads and most of the shared memory
// each) until *release becomes non-zero (host-mapped): another kernel on the same GPU.
void stress_hold_sms(int sms, const volatile int* release, void* stream);

}  // namespace tpb::test
