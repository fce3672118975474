#include <gtest/gtest.h>

#include <random>

#include "suite/baseline.h"

namespace tpb {
namespace {

nlohmann::json record(const std::string& id, double latency_scale, double noise, std::uint64_t seed, int n = 12) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> jitter(0.0, noise);
  nlohmann::json samples = nlohmann::json::array();
  for (int i = 0; i < n; ++i) samples.push_back(100.0 * latency_scale * (1.0 + jitter(rng)));
  return {{"case_id", id}, {"label", "decode tp2"}, {"status", "ok"},
          {"latency", {{"repetitions_us", samples}}},
          {"memory", nlohmann::json::array({{{"after_weights", {{"used_bytes", 1000000}}}}})},
          {"plan", {{"max_tokens", 5000}}},
          {"digests", nlohmann::json::array({{{"logits", "abcd"}}})}};
}

const MetricVerdict& find(const std::vector<MetricVerdict>& v, const std::string& metric) {
  for (const auto& x : v)
    if (x.metric == metric) return x;
  throw std::runtime_error("no metric " + metric);
}

TEST(Baseline, TenPercentSlowerIsRegression) {
  const auto v = compare_records(record("c1", 1.0, 0.01, 1), record("c1", 1.10, 0.01, 2), {});
  EXPECT_EQ(find(v, "latency_us").verdict, "regression");
  EXPECT_LT(find(v, "latency_us").p_value, 0.05);
}

TEST(Baseline, NoisyButEqualIsNotRegression) {
  const auto v = compare_records(record("c1", 1.0, 0.08, 3), record("c1", 1.0, 0.08, 4), {});
  const auto& lat = find(v, "latency_us");
  EXPECT_TRUE(lat.verdict == "ok" || lat.verdict == "noise") << lat.verdict << " " << lat.detail;
}

TEST(Baseline, IterationsWithoutRepetitionsAreInsufficientData) {
  auto o = record("c1", 1.0, 0.01, 11), n = record("c1", 1.5, 0.01, 12);
  o["latency"] = {{"samples_us", o["latency"]["repetitions_us"]}, {"p50", 100.0}};
  n["latency"] = {{"samples_us", n["latency"]["repetitions_us"]}, {"p50", 150.0}};
  const auto verdicts = compare_records(o, n, {});
  const auto& lat = find(verdicts, "latency_us");
  EXPECT_EQ(lat.verdict, "insufficient-data");
  EXPECT_DOUBLE_EQ(lat.ratio, 1.5);
}

TEST(Baseline, FewSamplesAreInsufficientData) {
  const auto v = compare_records(record("c1", 1.0, 0.01, 5, 5), record("c1", 1.5, 0.01, 6, 5), {});
  EXPECT_EQ(find(v, "latency_us").verdict, "insufficient-data");
}

TEST(Baseline, MemoryKvAndDigests) {
  auto o = record("c1", 1.0, 0.01, 7), n = record("c1", 1.0, 0.01, 8);
  n["memory"][0]["after_weights"]["used_bytes"] = 1100000;  // +10 % > 2 %
  n["plan"]["max_tokens"] = 4000;                           // fewer tokens
  n["digests"][0]["logits"] = "ffff";
  const auto v = compare_records(o, n, {});
  EXPECT_EQ(find(v, "memory.rank0.after_weights").verdict, "regression");
  EXPECT_EQ(find(v, "kv_tokens").verdict, "regression");
  EXPECT_EQ(find(v, "digest.rank0.logits").verdict, "mismatch");
}

TEST(Baseline, MissingCaseIsNoBaselineNeverPass) {
  const auto v = compare_runs({record("old", 1, 0.01, 9)}, {record("new", 1, 0.01, 10)}, {});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].verdict, "no-baseline");
  EXPECT_FALSE(is_regression(v[0]));
}

// compare exits 2 with the reason when nothing is comparable, instead of "0 regressions".
TEST(Baseline, NothingComparableSaysWhy) {
  const auto a = record("a", 1, 0.01, 1), b = record("b", 1, 0.01, 2);
  nlohmann::json skipped = {{"case_id", "a"}, {"status", "skipped"}, {"error", "device cuda: no GPU is visible"}};
  nlohmann::json failed = {{"case_id", "b"}, {"status", "failed"}};
  EXPECT_EQ(nothing_comparable({a, b}, {b}, "A", "B"), "");
  EXPECT_EQ(nothing_comparable({}, {a}, "/dev/null", "B"), "OLD /dev/null holds no record");
  EXPECT_EQ(nothing_comparable({a}, {}, "A", "empty.jsonl"), "NEW empty.jsonl holds no record");
  EXPECT_EQ(nothing_comparable({a}, {skipped, skipped, failed}, "A", "gpu-run"),
            "NEW gpu-run holds no ok record (3 records: 1 failed, 2 skipped)");
  EXPECT_EQ(nothing_comparable({a}, {b, record("c", 1, 0.01, 3)}, "A", "B"),
            "no case id in common: OLD A has 1 ok case, NEW B 2, none the same");
}

TEST(Baseline, HardwareDirName) {
  EXPECT_EQ(hardware_dir_name({{"gpus", nlohmann::json::array()}}), "cpu-ref");
  EXPECT_EQ(hardware_dir_name({{"gpus", {{{"name", "NVIDIA H200"}}, {{"name", "NVIDIA H200"}}}}}), "h200x2");
}

}  // namespace
}  // namespace tpb
