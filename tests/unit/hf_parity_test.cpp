// Parity with HF transformers' DeepseekV3ForCausalLM (fp32): the models and reference logits
// in tests/data/hf/<name>/ come from tests/hf_parity/make_hf_parity.py (k25-int4-*: INT4 routed
// experts in the released format, make_hf_parity_int4.py with compressed-tensors). Each model is run
// at TP 1, 2 and 4 (ranks as threads summing in rank order), as one prefill of the whole
// sequence and as a prefill of half of it followed by one-token decodes through the latent
// KV cache (the absorbed form). Budget: rel-L2 of the logits <= 1e-5 (ARCHITECTURE.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "reference_engine/config/model_config.h"
#include "reference_engine/model/engine.h"
#include "reference_engine/weights/safetensors.h"
#include "reference_engine/weights/weight_source.h"
#include "suite/checks/tolerance.h"
#include "tests/unit/engine_test_support.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;
// The budget is the policy's fp32 one (kTpRelL2Fp32, suite/checks/tolerance.h): transformers
// and the engine compute the same fp32 maths, in another sum order.

struct ParityCase {
  std::string model;  // folder under tests/data/hf
  int tp;             // tensor-parallel size
  bool decode;        // prefill half, then decode one token at a time
};

std::string case_name(const ::testing::TestParamInfo<ParityCase>& info) {
  std::string n = info.param.model + "_tp" + std::to_string(info.param.tp) + (info.param.decode ? "_decode" : "_prefill");
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

class HfParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(HfParity, LogitsMatchTransformers) {
  const ParityCase& pc = GetParam();
  const fs::path dir = fs::path(TPB_TEST_DATA_DIR) / "hf" / pc.model;
  if (!fs::exists(dir / "reference_logits.safetensors"))
    GTEST_SKIP() << "no HF parity data in " << dir << ": run tests/hf_parity/make_hf_parity.py where torch and "
                 << "transformers are installed";

  const ModelConfig config = load_model_config(dir.string());
  nlohmann::json ids_json;
  {
    std::ifstream f(dir / "input_ids.json");
    ids_json = nlohmann::json::parse(f);
  }
  const std::int64_t batch = static_cast<std::int64_t>(ids_json.size());
  const std::int64_t seq = static_cast<std::int64_t>(ids_json.at(0).size());
  std::vector<std::int64_t> ids;
  for (const auto& row : ids_json)
    for (const auto& t : row) ids.push_back(t.get<std::int64_t>());

  SafetensorsFile ref_file((dir / "reference_logits.safetensors").string());
  const StTensorInfo& ref_info = ref_file.info("logits");
  const std::int64_t V = config.vocab_size;
  ASSERT_EQ(ref_info.shape, (std::vector<std::int64_t>{batch, seq, V}));
  std::vector<float> reference(batch * seq * V);
  ref_file.read_f32("logits", 0, reference.size(), reference.data());

  const std::int64_t prefill = pc.decode ? seq / 2 : seq;
  const std::string prefix = config.nested_text_config ? "language_model." : "";
  auto per_rank = test::run_ranks<std::vector<float>>(pc.tp, [&](Communicator& comm) {
    auto weights = open_safetensors_weights(dir.string(), prefix);
    Engine engine(config, Shard{comm.rank(), pc.tp}, comm, *weights);
    std::vector<float> out(batch * seq * V);
    std::vector<std::int64_t> first;
    for (std::int64_t b = 0; b < batch; ++b)
      first.insert(first.end(), ids.begin() + b * seq, ids.begin() + b * seq + prefill);
    engine.prefill(first, batch);
    for (std::int64_t b = 0; b < batch; ++b)
      std::memcpy(out.data() + b * seq * V, engine.logits().data() + b * prefill * V, sizeof(float) * prefill * V);
    for (std::int64_t i = prefill; i < seq; ++i) {
      std::vector<std::int64_t> step;
      for (std::int64_t b = 0; b < batch; ++b) step.push_back(ids[b * seq + i]);
      engine.decode(step);
      for (std::int64_t b = 0; b < batch; ++b)
        std::memcpy(out.data() + (b * seq + i) * V, engine.logits().data() + b * V, sizeof(float) * V);
    }
    return out;
  });

  const std::vector<float>& got = per_rank[0];
  const double err = test::rel_l2(got, reference);
  ASSERT_FALSE(std::isnan(err)) << "NaN or Inf in the logits";
  double max_abs = 0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::abs(double(got[i]) - reference[i]) > max_abs) {
      max_abs = std::abs(double(got[i]) - reference[i]);
      worst = i;
    }
  std::printf("[ measured ] hf parity %s tp=%d %s: rel-L2 %.3g, max abs %.3g at [%zu, %zu, %zu]\n", pc.model.c_str(),
              pc.tp, pc.decode ? "prefill+decode" : "prefill", err, max_abs, worst / (seq * V), (worst / V) % seq,
              worst % V);
  EXPECT_LE(err, kTpRelL2Fp32) << "engine vs transformers: rel-L2 " << err << " (" << 100.0 * err / kTpRelL2Fp32
                           << "% of the budget), max abs " << max_abs << " at flat index " << worst << " (engine "
                           << got[worst] << ", HF " << reference[worst] << ")";
}

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> cases;
  for (const char* model : {"dsv3-grouped-bf16", "k25-fused-f16", "dsv3-noqlora-f32", "dsv3-odd-widths-bf16",
                            "k25-int4-odd", "k25-int4-g32"})
    for (int tp : {1, 2, 4})
      for (bool decode : {false, true}) cases.push_back({model, tp, decode});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, HfParity, ::testing::ValuesIn(parity_cases()), case_name);

}  // namespace
}  // namespace tpb
