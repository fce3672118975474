// ranks_sharing_device (tpb/kernels/device.h): the one reader of TPB_RANKS_PER_GPU, for the
// memory readings (kernels/cuda/device.cpp) and the suite's placement (suite/launch/placement.cpp).
#include <cstdlib>

#include "tpb/check.h"
#include "tpb/kernels/device.h"

namespace tpb {

int ranks_sharing_device() {
  const char* v = std::getenv("TPB_RANKS_PER_GPU");
  if (v == nullptr || *v == '\0') return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  TPB_CHECK(end != v && *end == '\0' && n >= 1 && n <= 1024,
            "environment TPB_RANKS_PER_GPU=" << v << ": expected a whole number of ranks from 1 to 1024");
  return static_cast<int>(n);
}

}  // namespace tpb
