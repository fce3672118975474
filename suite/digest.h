// Digests as results records print them: a 64-bit FNV-1a hash (tpb/fnv1a.h) as 16 lowercase
// hex digits, zero-padded. Every workload's output digests (digests.output, digests.logits),
// case ids (suite/sweep.h) and the observer's call and allocation sequence digests use this
// one format, so that a digest written by any of them compares as text with any other run's.
#pragma once

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
// logits is as reproducible as any other, so equality checks alone would.
std::string nonfinite_values(const std::string& name, const float* values, std::size_t n);

}  // namespace tpb
