// Structure-aware mutation for the JSON-reading fuzz targets (libFuzzer's
// LLVMFuzzerCustomMutator): byte flips rarely get past a JSON parser, so three mutations in
// four parse the input and change one node of it (a value swapped for an edge value — 0, -1,
// 2^31, 2^63 - 1, 2^64 - 1, 1e308, NaN-free doubles, null, "", another node's value —, a key
// or element removed or added, a node wrapped in an array), then serialise it again. The rest
// are libFuzzer's own byte mutations, which keep the syntax errors coming.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace tpb::fuzz {

enum class InputFormat {
  json,         // one JSON document
  json_lines,   // JSON Lines, possibly two files split at a line "----" (split_in_two)
  safetensors,  // 8-byte header length, JSON header, data
};

// One structured mutation of `input`; "" when it does not parse (the caller then mutates bytes).
std::string mutate_structured(std::string_view input, InputFormat format, std::mt19937_64& rng);

// The body of LLVMFuzzerCustomMutator for a target reading `format`.
std::size_t custom_mutate(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed,
                          InputFormat format);

}  // namespace tpb::fuzz

#ifdef TPB_LIBFUZZER
// Defines the custom mutator of a target (only where libFuzzer links: the replay main has none).
#define TPB_FUZZ_CUSTOM_MUTATOR(format)                                                                  \
  extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, \
                                                 unsigned seed) {                                         \
    return ::tpb::fuzz::custom_mutate(data, size, max_size, seed, format);                                \
  }
#else
#define TPB_FUZZ_CUSTOM_MUTATOR(format)
#endif
