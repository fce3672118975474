// The planner's weight arithmetic against what the CPU reference engine actually loads: with
// --quant f32 (every tensor in fp32, as that engine holds them) the predicted bytes per rank
// must equal the engine's own count exactly, for every small preset and TP size. This is the
// sharding table of MODEL.md checked twice, by two independent codes.
#include <gtest/gtest.h>

#include <string>

#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/weight_bytes.h"
#include "reference_engine/model/model_weights.h"
#include "reference_engine/weights/weight_source.h"

namespace tpb {
namespace {

struct Case {
  std::string preset;
  int tp;
};

class PlannerVsEngine : public ::testing::TestWithParam<Case> {};

TEST_P(PlannerVsEngine, F32WeightBytesPerRankEqualTheEnginesShard) {
  const ModelConfig config = load_model_config_by_name(GetParam().preset);
  const int tp = GetParam().tp;
  const WeightBytes planned = weight_bytes(config, Quantization::f32, tp);
  for (int rank = 0; rank < tp; ++rank) {
    auto source = make_synthetic_weights(7);
    const ModelWeights loaded = load_model_weights(config, Shard{rank, tp}, *source);
    EXPECT_EQ(static_cast<std::int64_t>(loaded.bytes), planned.bytes_per_rank)
        << GetParam().preset << " tp " << tp << " rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, PlannerVsEngine,
                         ::testing::Values(Case{"tiny-dsv3", 1}, Case{"tiny-dsv3", 2}, Case{"tiny-dsv3-grouped", 1},
                                           Case{"tiny-dsv3-grouped", 2}, Case{"tiny-dsv3-grouped", 4},
                                           Case{"small-dsv3", 1}, Case{"small-dsv3", 2}),
                         [](const auto& info) {
                           std::string n = info.param.preset + "_tp" + std::to_string(info.param.tp);
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace tpb
