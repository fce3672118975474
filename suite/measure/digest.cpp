#include "suite/measure/digest.h"

#include <cstdio>

#include "tpb/fnv1a.h"

namespace tpb {

std::string digest_hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string fnv1a64_hex(const void* bytes, std::size_t n) { return digest_hex(fnv1a64(bytes, n)); }

std::string nonfinite_sentence(const std::string& name, std::size_t count, std::size_t n, std::size_t first, float value) {
  char text[200];
  std::snprintf(text, sizeof text, "output '%s': %zu of %zu values are NaN or Inf, the first at index %zu (%g)", name.c_str(),
                count, n, first, static_cast<double>(value));
  return text;
}

}  // namespace tpb
