// The device-side description of a synthetic WeightRequest (tpb/kernels/gpu/synthetic_fill.h),
// built with the same key and scale as the CPU synthetic source (weights/synthetic.cpp), so
// a synthetic_fill of it writes exactly the block that source's read() would produce.
#pragma once

#include <cstdint>

#include "reference_engine/weights/weight_source.h"
#include "tpb/kernels/gpu/synthetic_fill.h"

namespace tpb::gpu {

// Throws InputError (TPB_CHECK) on a block outside the tensor or a non-positive fan_in, as
// the CPU source does.
SyntheticWindow synthetic_window(const WeightRequest& request, std::uint64_t seed);

}  // namespace tpb::gpu
