// Shared and exclusive placement without a GPU: the device of every rank, the environment a
// rank is started with (through real rank processes of the launcher), the scenario field and
// the CLI's override, case ids and skip reasons, and baselines that never mix placements.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "suite/records/baseline.h"
#include "suite/launch/launcher.h"
#include "suite/launch/placement.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"

namespace tpb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

TEST(Placement, ExclusiveIsOneRankPerGpuAndSkipsALargerGroup) {
  const RankPlacement p = place_ranks(Placement::exclusive, 4, 8);
  EXPECT_TRUE(p.skip_reason.empty());
  EXPECT_EQ(p.device_of_rank, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.ranks_per_gpu, 1);
  EXPECT_EQ(p.gpus_used, 4);
  EXPECT_FALSE(p.device_shared());
  const RankPlacement too_many = place_ranks(Placement::exclusive, 4, 2);
  EXPECT_TRUE(too_many.device_of_rank.empty());
  EXPECT_NE(too_many.skip_reason.find("needs 4 GPUs, 2 visible"), std::string::npos) << too_many.skip_reason;
}

TEST(Placement, SharedPacksConsecutiveRanksOntoTheVisibleGpus) {
  const RankPlacement one = place_ranks(Placement::shared, 8, 1);
  EXPECT_TRUE(one.skip_reason.empty());
  EXPECT_EQ(one.ranks_per_gpu, 8);
  EXPECT_EQ(one.gpus_used, 1);
  EXPECT_EQ(one.device_of_rank, std::vector<int>(8, 0));
  const RankPlacement odd = place_ranks(Placement::shared, 3, 2);  // ceil(3 / 2) = 2 per GPU
  EXPECT_EQ(odd.ranks_per_gpu, 2);
  EXPECT_EQ(odd.device_of_rank, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(odd.gpus_used, 2);
  const RankPlacement roomy = place_ranks(Placement::shared, 2, 4);  // enough GPUs: one each
  EXPECT_EQ(roomy.ranks_per_gpu, 1);
  EXPECT_EQ(roomy.device_of_rank, (std::vector<int>{0, 1}));
  EXPECT_FALSE(roomy.device_shared());
  EXPECT_FALSE(place_ranks(Placement::shared, 2, 0).skip_reason.empty());
}

TEST(Placement, RankEnvironmentGivesEachSharingRankItsOwnNcclHostId) {
  const RankPlacement p = place_ranks(Placement::shared, 4, 1);
  std::set<std::string> hostids;
  for (int r = 0; r < 4; ++r) {
    const std::vector<std::string> env = rank_environment(p, r, "grp");
    EXPECT_NE(std::find(env.begin(), env.end(), "TPB_DEVICE=0"), env.end());
    EXPECT_NE(std::find(env.begin(), env.end(), "TPB_RANKS_PER_GPU=4"), env.end());
    EXPECT_NE(std::find(env.begin(), env.end(), "TPB_PLACEMENT=shared"), env.end());
    for (const auto& e : env)
      if (e.rfind("NCCL_HOSTID=", 0) == 0) hostids.insert(e);
  }
  EXPECT_EQ(hostids.size(), 4u) << "every rank on a shared GPU needs a distinct NCCL_HOSTID";
  for (const auto& e : rank_environment(place_ranks(Placement::exclusive, 2, 2), 1, "grp"))
    EXPECT_NE(e.rfind("NCCL_HOSTID=", 0), 0u) << "exclusive placement leaves NCCL's host id alone: " << e;
}

TEST(Placement, ParseNamesWhereAndWhat) {
  EXPECT_EQ(parse_placement("shared", "x"), Placement::shared);
  try {
    parse_placement("packed", "run: --placement");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run: --placement"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"packed\""), std::string::npos) << e.what();
  }
}

json engine_scenario(const char* placement) {
  json doc = {{"schema", 1}, {"name", "p"}, {"workload", "engine"}, {"device", "cuda"},
              {"model", {{"preset", "tiny-dsv3"}}}, {"sweep", {{"tp", {1, 2, 4}}, {"allreduce", {"nccl"}}}}};
  if (placement != nullptr) doc["placement"] = placement;
  return doc;
}

TEST(Placement, ScenarioFieldIsValidatedWithItsPath) {
  EXPECT_EQ(parse_scenario(engine_scenario("shared"), "s.json").placement, Placement::shared);
  EXPECT_EQ(parse_scenario(engine_scenario(nullptr), "s.json").placement, Placement::exclusive);
  try {
    parse_scenario(engine_scenario("everywhere"), "s.json");
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json: $.placement"), std::string::npos) << e.what();
  }
  json cpu = engine_scenario("shared");
  cpu["device"] = "cpu";
  cpu["sweep"]["allreduce"] = {"shm"};
  EXPECT_THROW(parse_scenario(cpu, "s.json"), ScenarioError);
}

TEST(Placement, SharedCasesRunOnOneGpuWithTheirOwnIds) {
  MachineInfo one_gpu;
  one_gpu.cuda = true;
  one_gpu.gpu_count = 1;
  one_gpu.backends = {"nccl"};
  const auto exclusive = expand_cases(parse_scenario(engine_scenario("exclusive"), "s.json"), one_gpu);
  const auto shared = expand_cases(parse_scenario(engine_scenario("shared"), "s.json"), one_gpu);
  const auto unnamed = expand_cases(parse_scenario(engine_scenario(nullptr), "s.json"), one_gpu);
  ASSERT_EQ(exclusive.size(), 3u);
  ASSERT_EQ(shared.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(unnamed[i].id, exclusive[i].id) << "an exclusive case keeps the id it had before placements";
    EXPECT_NE(shared[i].id, exclusive[i].id) << "shared and exclusive cases never share an id (nor a baseline)";
    EXPECT_NE(shared[i].group_key, exclusive[i].group_key);
    EXPECT_TRUE(shared[i].skip_reason.empty()) << shared[i].label << ": " << shared[i].skip_reason;
    EXPECT_EQ(shared[i].placement.ranks_per_gpu, shared[i].tp);
  }
  EXPECT_TRUE(exclusive[0].skip_reason.empty());
  EXPECT_NE(exclusive[1].skip_reason.find("needs 2 GPUs, 1 visible"), std::string::npos) << exclusive[1].skip_reason;
}

// Ids pinned as literals (not recomputed with the formula under test): the stored baselines
// of earlier sessions must still find their cases now that placement and comm exist.
TEST(Placement, StoredBaselineIdsAreUnchanged) {
  MachineInfo one_gpu;
  one_gpu.cuda = true;
  one_gpu.gpu_count = 1;
  one_gpu.backends = {"nccl", "custom-oneshot", "custom-twoshot", "auto"};
  const auto has = [](const std::vector<Case>& cases, const std::string& id, const std::string& label) {
    return std::any_of(cases.begin(), cases.end(), [&](const Case& c) { return c.id == id && c.label == label; });
  };
  const auto decode = expand_cases(load_scenario(std::string(TPB_SOURCE_DIR) + "/scenarios/decode-1gpu.json"), one_gpu);
  EXPECT_TRUE(has(decode, "3b21855f97ccf103", "decode tp1 b1 s1024 graph nccl"));
  EXPECT_TRUE(has(decode, "d53b1373b785c062", "decode tp1 b1 s1024 graph nccl [repeat]"));
  EXPECT_TRUE(has(decode, "57567c4ec7926c5f", "decode tp1 b64 s8192 graph nccl"));
  const auto memory =
      expand_cases(load_scenario(std::string(TPB_SOURCE_DIR) + "/scenarios/memory-fraction-1gpu.json"), one_gpu);
  EXPECT_TRUE(has(memory, "d4f447d06aff31af", "decode tp1 b16 s8192 mf0.55 graph nccl"));
}

TEST(Placement, BaselinesNeverCompareSharedWithExclusive) {
  const json latency = {{"samples_us", {10.0, 11.0}}, {"p50", 10.5}, {"unit", "us"}};
  json old_rec = {{"case_id", "a"}, {"label", "x"}, {"status", "ok"}, {"latency", latency},
                  {"placement", {{"placement", "exclusive"}, {"ranks_per_gpu", 1}}}};
  json new_rec = old_rec;
  new_rec["placement"] = {{"placement", "shared"}, {"ranks_per_gpu", 2}};
  const auto verdicts = compare_records(old_rec, new_rec, BaselineTolerances{});
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].metric, "placement");
  EXPECT_EQ(verdicts[0].verdict, "mismatch");
  EXPECT_TRUE(is_regression(verdicts[0]));
  new_rec["placement"]["placement"] = "exclusive";
  for (const auto& v : compare_records(old_rec, new_rec, BaselineTolerances{})) EXPECT_NE(v.metric, "placement");
}

// Real rank processes (the tpbench binary's worker role, the test-only probe workload, which
// reports the placement variables it was started with).
TEST(Placement, LauncherStartsEachRankWithItsPlace) {
  LauncherOptions o;
  o.worker_binary = TPB_TPBENCH_BINARY;
  o.log_dir = (fs::temp_directory_path() / ("tpb-placement-test-" + std::to_string(::getpid()))).string();
  setenv("NCCL_HOSTID", "users-own", 1);
  const json spec = {{"case_id", "probe"}, {"workload", "probe"}, {"device", "cpu"}, {"params", json::object()}};
  std::set<std::string> hostids;
  {
    Launcher launcher(o);
    const RankPlacement shared = place_ranks(Placement::shared, 4, 1);
    const CaseRun run = launcher.run_case("shared", 4, spec, 30, &shared);
    ASSERT_TRUE(run.ok) << run.error;
    for (const json& r : run.ranks) {
      const json env = r["metrics"]["environment"];
      EXPECT_EQ(env["TPB_DEVICE"], "0");
      EXPECT_EQ(env["TPB_RANKS_PER_GPU"], "4");
      EXPECT_EQ(env["TPB_PLACEMENT"], "shared");
      ASSERT_TRUE(env["NCCL_HOSTID"].is_string());
      hostids.insert(env["NCCL_HOSTID"].get<std::string>());
    }
    const RankPlacement exclusive = place_ranks(Placement::exclusive, 2, 2);
    const CaseRun ex = launcher.run_case("exclusive", 2, spec, 30, &exclusive);
    ASSERT_TRUE(ex.ok) << ex.error;
    for (std::size_t r = 0; r < ex.ranks.size(); ++r) {
      const json env = ex.ranks[r]["metrics"]["environment"];
      EXPECT_EQ(env["TPB_DEVICE"], std::to_string(r));
      EXPECT_EQ(env["NCCL_HOSTID"], "users-own") << "exclusive placement keeps the user's NCCL_HOSTID";
    }
  }
  unsetenv("NCCL_HOSTID");
  EXPECT_EQ(hostids.size(), 4u);
  EXPECT_EQ(hostids.count("users-own"), 0u);
  std::error_code ec;
  fs::remove_all(o.log_dir, ec);
}

}  // namespace
}  // namespace tpb
