// The engine workload on one rank (shm with a single rank): result fields, determinism of
// the digests, the KV cache held at seq_len for every decode step, and clear input errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "reference_engine/weights/safetensors.h"
#include "suite/workloads/engine_workload.h"
#include "tests/unit/engine_test_support.h"

namespace tpb {
namespace {

class OneRankBootstrap : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
  void barrier() override {}
  std::string group_id() const override { return "engine-workload-test-" + std::to_string(::getpid()); }
};

nlohmann::json spec(const std::string& mode, int batch, int seq_len) {
  return {{"case_id", "t"},
          {"workload", "engine"},
          {"device", "cpu"},
          {"params", {{"mode", mode}, {"tp", 1}, {"batch_size", batch}, {"seq_len", seq_len}, {"allreduce", "shm"}}},
          {"model", {{"config_path", test::preset("tiny-dsv3")}, {"overrides", nlohmann::json::object()},
                     {"weights", "synthetic"}, {"seed", 5}}},
          {"measure", {{"warmup", 1}, {"iterations", 3}, {"repetitions", 2}}}};
}

// The workload as the worker runs it: the spec parsed once, the result typed.
RankResult run(const nlohmann::json& case_spec, WorkerState& state) {
  return run_engine_workload(CaseSpec::from_json(case_spec), state);
}

TEST(EngineWorkload, DecodeStepsAtAFixedContext) {
  OneRankBootstrap boot;
  WorkerState state(boot);
  const auto a = run(spec("decode", 2, 9), state);
  EXPECT_EQ(a.latency_us.size(), 6u);
  for (double v : a.latency_us) EXPECT_GT(v, 0.0);
  const auto& m = a.metrics;
  EXPECT_EQ(m["tokens_per_step"], 2);
  EXPECT_EQ(m["kv_tokens"], 10);
  EXPECT_EQ(m["allreduces_per_step"], 2 * 3 + 1);  // 2 per layer + the embedding
  EXPECT_EQ(a.work.tokens, 2);  // the record's tokens/s derives from it (suite/measure/measure.h)
  EXPECT_FALSE(m.contains("tokens_per_s")) << "one tokens/s per record: the throughput's";
  EXPECT_EQ(a.outputs.at("logits").size(), 2u * 256u);  // one decode step of 2 sequences, vocab 256
  // The cache is rewound before every step, so a second case (engine reused) gives the
  // same logits, and a longer context gives other logits.
  const auto b = run(spec("decode", 2, 9), state);
  EXPECT_EQ(a.digests, b.digests);
  const auto c = run(spec("decode", 2, 10), state);
  EXPECT_NE(a.digests, c.digests);
  EXPECT_EQ(c.metrics["kv_tokens"], 11);
}

TEST(EngineWorkload, PrefillAndLogitsModes) {
  OneRankBootstrap boot;
  WorkerState state(boot);
  const auto p = run(spec("prefill", 2, 6), state);
  EXPECT_EQ(p.metrics["tokens_per_step"], 12);
  auto s = spec("logits", 1, 1);
  const auto out = std::filesystem::temp_directory_path() / ("tpb_engine_workload_" + std::to_string(::getpid()) + ".st");
  s["params"]["input_ids"] = {{1, 2, 3}, {4, 5, 6}};
  s["params"]["prefill"] = 1;
  s["params"]["out"] = out.string();
  run(s, state);
  SafetensorsFile f(out.string());
  EXPECT_EQ(f.info("logits").shape, (std::vector<std::int64_t>{2, 3, 256}));
  std::filesystem::remove(out);
}

TEST(EngineWorkload, BadCasesAreInputErrors) {
  OneRankBootstrap boot;
  WorkerState state(boot);
  auto s = spec("decode", 1, 4);
  s["device"] = "cuda";
  EXPECT_THROW(run(s, state), InputError);
  s = spec("sideways", 1, 4);
  EXPECT_THROW(run(s, state), InputError);
  s = spec("decode", 0, 4);
  EXPECT_THROW(run(s, state), InputError);
  s = spec("decode", 1, 4);
  s["params"]["tp"] = 2;
  EXPECT_THROW(run(s, state), InputError);
  s = spec("logits", 1, 4);
  s["params"]["input_ids"] = {{1, 2}, {3}};
  EXPECT_THROW(run(s, state), InputError);
}

}  // namespace
}  // namespace tpb
