// The case spec and the rank result across the process boundary (suite/scenario/case_spec.h): a full
// one of each survives JSON unchanged, the JSON names are those results.jsonl and baselines
// read, fields left out take their defaults, and a field of the wrong type is refused with
// an InputError naming its path.
#include <gtest/gtest.h>

#include <string>

#include "suite/scenario/case_spec.h"
#include "tpb/check.h"

namespace tpb {
namespace {

using nlohmann::json;

CaseSpec full_spec() {
  CaseSpec s;
  s.case_id = "0123456789abcdef";
  s.label = "decode tp2 b4 s16 nccl";
  s.workload = "engine";
  s.device = "cuda";
  s.params = {{"mode", "decode"}, {"tp", 2}, {"batch_size", 4}, {"seq_len", 16}, {"allreduce", "nccl"},
              {"mem_fraction", 0.5}, {"instrumentation", "timing"}, {"cuda_graph", true}};
  s.kv_pool = true;
  s.model = CaseSpec::Model{"/models/tiny-dsv3.json", {{"num_hidden_layers", 2}}, "synthetic", 5};
  s.measure.warmup = 0;
  s.measure.iterations = 3;
  s.measure.repetitions = 9;
  s.measure.interleave_instrumentation = true;
  s.measure.min_duration_s = 0.25;
  s.measure.timeout_s = 120;
  s.comm.custom_max_bytes = 64 << 20;
  s.trace_dir = "/tmp/run/traces";
  return s;
}

RankResult full_result() {
  RankResult r;
  r.rank = 1;
  r.latency_us = {10.5, 11.0, 12.25};
  r.interleaved_off_latency_us = {10.0, 10.75, 12.0};
  r.interleaving = "ABBA";
  r.work.tokens = 4;
  r.digests = {{"logits", "00112233aabbccdd"}};
  r.memory = {{"after_weights", {{"used_bytes", 1024}}}, {"breakdown", {{"weights", 512}}}};
  r.plan = {{"source", "planner (bf16, tp 2)"}, {"breakdown", {{"weights", 500}}}};
  r.metrics = {{"mode", "decode"}, {"tokens_per_step", 4}};
  r.comm = {{"backend", "nccl"}, {"requested", "nccl"}, {"memory_bytes", 0}, {"fallback_reason", ""},
            {"allreduce_calls", json::array()}};
  r.outputs = {{"logits", {0.1f, -2.5f, 3.0e-8f}}};
  r.infeasible = "rank 1: the KV pool does not hold the case";
  return r;
}

std::string input_error_of(const json& j, bool spec) {
  try {
    if (spec)
      CaseSpec::from_json(j);
    else
      RankResult::from_json(j);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(CaseSpec, AFullSpecRoundTripsThroughJsonUnderItsNames) {
  const CaseSpec s = full_spec();
  const json j = s.to_json();
  EXPECT_EQ(j["case_id"], s.case_id);
  EXPECT_EQ(j["kv_pool"], true);
  EXPECT_EQ(j["model"], json({{"config_path", "/models/tiny-dsv3.json"}, {"overrides", {{"num_hidden_layers", 2}}},
                              {"weights", "synthetic"}, {"seed", 5}}));
  EXPECT_EQ(j["measure"], json({{"warmup", 0}, {"iterations", 3}, {"repetitions", 9}, {"interleave_instrumentation", true},
                                {"min_duration_s", 0.25}, {"timeout_s", 120.0}}));
  EXPECT_EQ(j["comm"], json({{"custom_max_bytes", 64 << 20}}));
  EXPECT_EQ(j["trace_dir"], "/tmp/run/traces");
  // Through text, as the launcher sends it.
  const CaseSpec back = CaseSpec::from_json(json::parse(j.dump()));
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.measure.counts({2, 10, 1}).repetitions, 9);
  EXPECT_EQ(back.model->seed.value(), 5u);
  EXPECT_EQ(back.comm.custom_max_bytes.value(), 64 << 20);
}

TEST(CaseSpec, FieldsLeftOutTakeTheirDefaults) {
  const CaseSpec s = CaseSpec::from_json({{"workload", "probe"}, {"model", nullptr}});
  EXPECT_EQ(s.device, "cpu");
  EXPECT_EQ(s.params, json::object());
  EXPECT_FALSE(s.kv_pool);
  EXPECT_FALSE(s.model.has_value());
  EXPECT_FALSE(s.trace_dir.has_value());
  const MeasureCounts c = s.measure.counts({1, 5, 1});  // the workload's defaults
  EXPECT_EQ(c.warmup, 1);
  EXPECT_EQ(c.iterations, 5);
  const json j = s.to_json();
  EXPECT_TRUE(j["model"].is_null());
  EXPECT_FALSE(j.contains("comm")) << "written only when the scenario has a comm section";
  EXPECT_FALSE(j.contains("trace_dir"));
  EXPECT_FALSE(j["measure"].contains("warmup")) << "a count left out stays the workload's to choose";
}

TEST(CaseSpec, AWronglyTypedFieldIsRefusedNamingItsPath) {
  const json good = full_spec().to_json();
  const auto with = [&](const std::string& pointer, const json& value) {
    json j = good;
    j[json::json_pointer(pointer)] = value;
    return j;
  };
  EXPECT_NE(input_error_of(with("/measure/iterations", "3"), true).find("case_spec.measure.iterations: expected an integer >= 1, got \"3\""),
            std::string::npos);
  EXPECT_NE(input_error_of(with("/model/seed", 1.5), true).find("case_spec.model.seed: expected an integer"), std::string::npos);
  EXPECT_NE(input_error_of(with("/kv_pool", "yes"), true).find("case_spec.kv_pool: expected true or false"), std::string::npos);
  EXPECT_NE(input_error_of(with("/params", json::array()), true).find("case_spec.params: expected an object"), std::string::npos);
  EXPECT_NE(input_error_of(with("/comm/custom_max_bytes", 0), true).find("case_spec.comm.custom_max_bytes: expected an integer >= 1"),
            std::string::npos);
  EXPECT_NE(input_error_of(with("/trace_dir", 7), true).find("case_spec.trace_dir: expected a string"), std::string::npos);
  EXPECT_NE(input_error_of(with("/model", "tiny"), true).find("case_spec.model: expected an object"), std::string::npos);
  json no_workload = good;
  no_workload.erase("workload");
  EXPECT_NE(input_error_of(no_workload, true).find("case_spec.workload: required"), std::string::npos);
  EXPECT_NE(input_error_of(json::array(), true).find("case_spec: expected an object"), std::string::npos);
}

TEST(RankResult, AFullResultRoundTripsThroughJsonUnderItsNames) {
  const RankResult r = full_result();
  const json j = r.to_json();
  for (const char* name : {"rank", "latency_us", "interleaved_off_latency_us", "interleaving", "work", "digests", "memory",
                           "plan", "metrics", "comm", "outputs", "infeasible"})
    EXPECT_TRUE(j.contains(name)) << name;
  EXPECT_EQ(j["work"], json({{"tokens_per_step", 4.0}}));
  EXPECT_EQ(j["digests"], json({{"logits", "00112233aabbccdd"}}));
  const RankResult back = RankResult::from_json(json::parse(j.dump()));
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.outputs.at("logits"), r.outputs.at("logits")) << "float samples survive the text exactly";
  EXPECT_EQ(back.latency_us, r.latency_us);
  EXPECT_EQ(back.work.tokens, 4);
}

TEST(RankResult, OptionalPartsAreLeftOutWhenEmpty) {
  RankResult r;
  r.rank = 0;
  const json j = r.to_json();
  EXPECT_EQ(j, json({{"rank", 0}, {"latency_us", json::array()}, {"digests", json::object()}, {"memory", json::object()},
                     {"metrics", nullptr}, {"comm", json::object()}}));
  const RankResult back = RankResult::from_json({{"rank", 3}});
  EXPECT_EQ(back.rank, 3);
  EXPECT_TRUE(back.plan.is_null());
  EXPECT_TRUE(back.outputs.empty());
  EXPECT_TRUE(back.infeasible.empty());
}

TEST(RankResult, AWronglyTypedFieldIsRefusedNamingItsPath) {
  json j = full_result().to_json();
  j["latency_us"][1] = "fast";
  EXPECT_NE(input_error_of(j, false).find("rank_result.latency_us[1]: expected a number"), std::string::npos);
  j = full_result().to_json();
  j["digests"]["logits"] = 17;
  EXPECT_NE(input_error_of(j, false).find("rank_result.digests.logits: expected a hex string"), std::string::npos);
  j = full_result().to_json();
  j["infeasible"] = true;
  EXPECT_NE(input_error_of(j, false).find("rank_result.infeasible: expected a string"), std::string::npos);
  j = full_result().to_json();
  j["outputs"]["logits"] = "many";
  EXPECT_NE(input_error_of(j, false).find("rank_result.outputs.logits: expected a list of numbers"), std::string::npos);
}

}  // namespace
}  // namespace tpb
