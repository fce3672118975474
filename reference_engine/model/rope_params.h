// The yarn rope of a model config as the rope kernels take it: one function for the CPU and
// the GPU engine, so both rotate by the same table.
#pragma once

#include "reference_engine/config/model_config.h"
#include "tpb/kernels/rope_yarn.h"

namespace tpb {

kernels::RopeParams rope_params(const ModelConfig& config);

}  // namespace tpb
