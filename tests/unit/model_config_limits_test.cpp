// Model-config limits (issue 17, finding 1): products of dimensions that would overflow an
// element count are refused with overflow-checked arithmetic, naming the tensor family.
#include <gtest/gtest.h>

#include <string>

#include "reference_engine/config/model_config.h"
#include "tpb/check.h"

namespace tpb {
namespace {

ModelConfig tiny() { return load_model_config_by_name("tiny-dsv3"); }

TEST(ModelConfigLimits, ExpertsPastTwoToThe44ElementsAreRefused) {
  ModelConfig c = tiny();
  c.validate();
  c.n_routed_experts = 16384;
  c.n_group = 1;
  c.topk_group = 1;
  c.moe_intermediate_size = 1 << 20;
  c.hidden_size = 4096;
  try {
    c.validate();
    FAIL() << "accepted " << c.n_routed_experts << " experts of " << c.moe_intermediate_size << " x " << c.hidden_size;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the experts (num_hidden_layers x experts x 3 x moe_intermediate_size x hidden_size): "
                                         "more than 2^44 elements"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelConfigLimits, EachDimensionHasALimit) {
  ModelConfig c = tiny();
  c.hidden_size = (1 << 16) + 1;
  EXPECT_THROW(c.validate(), InputError);
  c = tiny();
  c.rms_norm_eps = 2;
  EXPECT_THROW(c.validate(), InputError);
  c = tiny();
  c.routed_scaling_factor = 0.0 / 0.0;
  EXPECT_THROW(c.validate(), InputError);
}

}  // namespace
}  // namespace tpb
