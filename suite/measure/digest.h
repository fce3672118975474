// Digests as results records print them: a 64-bit FNV-1a hash (tpb/fnv1a.h) as 16 lowercase
// hex digits, zero-padded. Every workload's output digests (digests.output, digests.logits),
// case ids (suite/scenario/sweep.h) and the observer's call and allocation sequence digests use this
// one format, so that a digest written by any of them compares as text with any other run's.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tpb {

// `value` as 16 lowercase hex digits.
std::string digest_hex(std::uint64_t value);

// The output digest: FNV-1a 64 of `n` bytes at `bytes`, as 16 hex digits.
std::string fnv1a64_hex(const void* bytes, std::size_t n);

// "" when every value is finite; else "output '<name>': <count> of <n> values are NaN or Inf, the
// first at index <i> (<value>)". A conformance suite never calls NaN a pass: a digest of NaN
// logits is as reproducible as any other, so equality checks alone would. `value_at(i)` gives
// element i as a float (an output of another dtype is read in place, not copied).
std::string nonfinite_sentence(const std::string& name, std::size_t count, std::size_t n, std::size_t first, float value);
template <class ValueAt>
std::string nonfinite_values(const std::string& name, std::size_t n, ValueAt value_at) {
  std::size_t count = 0, first = 0;
  float first_value = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = value_at(i);
    if (std::isfinite(v)) continue;
    if (count++ == 0) first = i, first_value = v;
  }
  return count == 0 ? std::string() : nonfinite_sentence(name, count, n, first, first_value);
}
inline std::string nonfinite_values(const std::string& name, const float* values, std::size_t n) {
  return nonfinite_values(name, n, [values](std::size_t i) { return values[i]; });
}

}  // namespace tpb
