#include "suite/digest.h"

#include <cmath>
#include <cstdio>

#include "tpb/fnv1a.h"

namespace tpb {

std::string digest_hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string fnv1a64_hex(const void* bytes, std::size_t n) { return digest_hex(fnv1a64(bytes, n)); }

std::string nonfinite_values(const std::string& name, const float* values, std::size_t n) {
  std::size_t count = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i]) && count++ == 0) first = i;
  if (count == 0) return "";
  char text[200];
  std::snprintf(text, sizeof text, "output '%s': %zu of %zu values are NaN or Inf, the first at index %zu (%g)", name.c_str(),
                count, n, first, static_cast<double>(values[first]));
  return text;
}

}  // namespace tpb
