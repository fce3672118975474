// CPU reference of the allreduce arithmetic every tpbench backend must match: fp32 sum in
// rank order 0..n-1, rounded once to the element type (round to nearest even).
#pragma once

#include <cstddef>
#include <vector>

#include "tpb/dtype.h"

namespace tpb {

// out[i] = round(sum_{r=0..n-1} float(inputs[r][i])). Host memory; `out` may alias inputs[k].
void allreduce_ref(const std::vector<const void*>& inputs, void* out, std::size_t count, DType dtype);

}  // namespace tpb
