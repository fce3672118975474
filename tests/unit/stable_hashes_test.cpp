// Values that must never change: case ids (baselines and resumed runs are keyed by them),
// synthetic weights (every stored digest depends on them), output digests and the observer's
// sequence digests. Each value below was computed before FNV-1a had one home (issue 16): the
// FNV-1a vectors and synthetic values by an independent Python implementation (the first two
// strings are FNV's published test vectors), the GPU case ids read from the stored baseline
// baselines/h200x1/decode-1gpu.jsonl, the CPU case ids from nlohmann's canonical dump.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>

#include "suite/measure/digest.h"
#include "suite/measure/instrumentation.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"
#include "suite/workloads/observed_communicator.h"
#include "tpb/fnv1a.h"
#include "tpb/kernels/synthetic_weights.h"

namespace tpb {
namespace {

using nlohmann::json;

TEST(StableHashes, Fnv1a64KnownStrings) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(fnv1a64("tpbench"), 0x0c60dcb8c96d7ea5ULL);
}

TEST(StableHashes, OutputDigestIsFnv1a64Hex) {
  const std::string text = "tpbench";
  EXPECT_EQ(fnv1a64_hex(text.data(), text.size()), "0c60dcb8c96d7ea5");
  EXPECT_EQ(fnv1a64_hex(nullptr, 0), "cbf29ce484222325");
}

TEST(StableHashes, SyntheticWeights) {
  const std::uint64_t name = synthetic::name_hash("model.layers.3.mlp.experts.17.gate_proj.weight");
  EXPECT_EQ(name, 0xa77a621493562064ULL);
  const std::uint64_t key = synthetic::tensor_key(1234, name);
  EXPECT_EQ(key, 0xbfd60adef802c636ULL);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(synthetic::value(synthetic::InitKind::linear, 0.125f, key, 12345)),
            0x3df372f4u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(synthetic::value(synthetic::InitKind::norm, 0.0f, key, 12345)), 0x3f879b98u);
}

TEST(StableHashes, CaseIdsOfACpuScenario) {
  const json doc = json::parse(R"({"schema": 1, "workload": "allreduce", "device": "cpu",
                                   "sweep": {"tp": [2], "message_bytes": [4096]}, "checks": ["deterministic"]})");
  const auto cases = expand_cases(parse_scenario(doc, "pins.json"), MachineInfo{false, 0, {"shm"}});
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].role, "sweep");
  EXPECT_EQ(cases[0].id, "f10177152c1bee30");
  EXPECT_EQ(cases[1].role, "repeat");
  EXPECT_EQ(cases[1].id, "cf24acce036ab4cb");
}

// The ids the stored GPU baseline holds (baselines/h200x1/decode-1gpu.jsonl).
TEST(StableHashes, CaseIdsOfAStoredGpuBaseline) {
  const Scenario s = load_scenario(std::string(TPB_SOURCE_DIR) + "/scenarios/decode-1gpu.json", ScenarioEnv{true});
  const auto cases = expand_cases(s, MachineInfo{true, 1, {"shm", "nccl"}});
  ASSERT_GE(cases.size(), 2u);
  EXPECT_EQ(cases[0].label, "decode tp1 b1 s1024 graph nccl");
  EXPECT_EQ(cases[0].id, "3b21855f97ccf103");
  EXPECT_EQ(cases[1].role, "repeat");
  EXPECT_EQ(cases[1].id, "d53b1373b785c062");
}

TEST(StableHashes, ObserverSequenceDigests) {
  CallSequence calls(4);
  calls.record(CallSequence::kAllReduce, 896, DType::f32);
  calls.record(CallSequence::kAllGather, 7168, DType::bf16);
  calls.record(CallSequence::kBarrier, 0, DType::f32);
  EXPECT_EQ(calls.to_json()["digest"], "f13339e9ded83fd2");
  AllocationLedger ledger;
  ledger.add("a", 4096);
  ledger.add("b", 1 << 20);
  EXPECT_EQ(ledger.sequence_json()["digest"], "a06639b7867b3d25");
}

}  // namespace
}  // namespace tpb
