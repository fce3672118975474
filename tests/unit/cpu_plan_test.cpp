// CPU engine cases planned like GPU ones (issue 37, finding 7): a case inside the scenario
// limits (batch_size or seq_len up to 2^40) whose ranks cannot fit the host is `infeasible`
// with the planner's sentence before a rank starts, instead of a rank's std::bad_alloc. The
// plan's terms against the engine's own (weights exactly, the KV cache at its peak), the rule
// (every rank one host holds, against what it has), its sentence, and the host's memory read
// from /proc/meminfo and the cgroup's limit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine_test_support.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/cpu_engine_bytes.h"
#include "reference_engine/memory/host_memory.h"
#include "reference_engine/model/engine.h"
#include "reference_engine/weights/weight_source.h"
#include "suite/scenario/case_plan.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"

namespace tpb {
namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

MachineInfo cpu_machine() { return {false, 0, {"shm"}}; }

Scenario cpu_scenario(const std::string& sweep, const std::string& mode = "decode") {
  return load_scenario_text(R"({"schema": 1, "name": "cpu-plan", "workload": "engine", "model": {"preset": "tiny-dsv3"},
    "device": "cpu", "mode": [")" + mode + R"("], "sweep": )" + sweep + "}",
                            "<cpu_plan_test>");
}

// The terms the engine counts itself: the weights exactly, and the KV cache a decode case holds
// after its first step (the prefilled seq_len tokens grown to 2 x seq_len; the plan's peak is
// the 3 x seq_len of that growth, old and new cache at once).
TEST(CpuPlan, WeightsAndKvCacheAreTheEnginesOwn) {
  const ModelConfig config = load_model_config_by_name("tiny-dsv3");
  test::SingleRankCommunicator comm;
  auto weights = make_synthetic_weights(7);
  Engine engine(config, Shard{0, 1}, comm, *weights);
  const std::int64_t batch = 3, seq = 8;
  const CpuEngineBytes planned = cpu_engine_bytes(config, {1, batch, seq, true});
  EXPECT_EQ(planned.weights, static_cast<double>(engine.weight_bytes()));
  engine.prefill(std::vector<std::int64_t>(batch * seq, 1), batch);
  EXPECT_EQ(2 * static_cast<double>(engine.kv_cache_bytes()), planned.kv_cache * 2 / 3);  // seq_len tokens
  engine.rewind(seq);
  engine.decode(std::vector<std::int64_t>(batch, 2));
  EXPECT_EQ(static_cast<double>(engine.kv_cache_bytes()), planned.kv_cache * 2 / 3);  // grown to 2 x seq_len
  // A prefill case holds the new cache and the last step's: 2 x seq_len.
  EXPECT_EQ(cpu_engine_bytes(config, {1, batch, seq, false}).kv_cache, planned.kv_cache * 2 / 3);
}

TEST(CpuPlan, NeedGrowsWithTheCaseAndNeverOverflows) {
  const ModelConfig config = load_model_config_by_name("tiny-dsv3");
  double last = 0;
  for (std::int64_t batch = 1; batch <= (std::int64_t{1} << 40); batch <<= 5) {
    const double need = cpu_engine_bytes(config, {1, batch, 16, true}).total();
    EXPECT_GT(need, last) << batch;
    last = need;
  }
  // 2^40 x 2^40 tokens: 2^80 does not fit an int64; the plan counts in doubles.
  const CpuEngineBytes huge = cpu_engine_bytes(config, {1, std::int64_t{1} << 40, std::int64_t{1} << 40, false});
  EXPECT_TRUE(std::isfinite(huge.total()));
  EXPECT_GT(huge.total(), 1e24);
  // A second rank holds half the sharded weights, but its own cache and activations.
  const CpuEngineBytes one = cpu_engine_bytes(config, {1, 4, 64, true}), two = cpu_engine_bytes(config, {2, 4, 64, true});
  EXPECT_LT(two.weights, one.weights);
  EXPECT_EQ(two.kv_cache, one.kv_cache);
}

// The finding's case: batch 2^30 on a 64 GiB host is infeasible with one sentence; batch 1 fits.
TEST(CpuPlan, ACaseBeyondTheHostIsInfeasibleWithThePlannersSentence) {
  const Scenario s = cpu_scenario(R"({"tp": [1], "batch_size": [1, 1073741824], "seq_len": [16], "allreduce": ["shm"]})");
  const std::vector<Case> cases = expand_cases(s, cpu_machine());
  ASSERT_EQ(cases.size(), 2u);
  const PlanHost host{64 * kGiB, "test", 1};
  const auto small = plan_cpu_engine_case(s, cases[0], host);
  ASSERT_TRUE(small);
  EXPECT_TRUE(small->feasible) << small->verdict;
  EXPECT_EQ(small->verdict.rfind("fits: 1 rank of this case on one host needs ", 0), 0u) << small->verdict;

  const auto big = plan_cpu_engine_case(s, cases[1], host);
  ASSERT_TRUE(big);
  EXPECT_FALSE(big->feasible);
  const std::string& v = big->verdict;
  EXPECT_EQ(v.rfind("not enough memory: 1 rank of this case on one host needs ", 0), 0u) << v;
  EXPECT_NE(v.find("(per rank: weights "), std::string::npos) << v;
  EXPECT_NE(v.find("and the host has 64.00 GiB (test); at seq_len 16, batch_size <= "), std::string::npos) << v;
  // The batch the sentence names fits, and one more does not.
  const std::size_t at = v.find("batch_size <= ") + 14;
  const std::int64_t largest = std::stoll(v.substr(at));
  const ModelConfig config = load_model_config_by_name("tiny-dsv3");
  EXPECT_LE(cpu_engine_bytes(config, {1, largest, 16, true}).total(), 64.0 * kGiB);
  EXPECT_GT(cpu_engine_bytes(config, {1, largest + 1, 16, true}).total(), 64.0 * kGiB);
  // record.plan: what the record of an infeasible case carries.
  EXPECT_EQ(big->plan["feasible"], false);
  EXPECT_EQ(big->plan["verdict"], v);
  EXPECT_EQ(big->plan["host_memory_bytes"], 64 * kGiB);
  EXPECT_EQ(big->plan["host_memory_source"], "test");
  EXPECT_EQ(big->plan["ranks_on_host"], 1);
  double sum = 0;
  for (const char* term : {"weights", "kv_cache", "activations", "inputs"}) sum += big->plan["breakdown"][term].get<double>();
  EXPECT_EQ(big->plan["needed_bytes"].get<double>(), sum);
  EXPECT_EQ(big->plan["source"], "planner (f32, tp 1) for the CPU engine on this host");
}

// Every rank a host holds counts: at TP 2 on one host both ranks, over two hosts one each.
TEST(CpuPlan, EveryRankOneHostHoldsCounts) {
  const Scenario s = cpu_scenario(R"({"tp": [2], "batch_size": [64], "seq_len": [64], "allreduce": ["shm"]})");
  const Case c = expand_cases(s, cpu_machine()).front();
  const auto one_host = plan_cpu_engine_case(s, c, {64 * kGiB, "test", 1});
  const auto two_hosts = plan_cpu_engine_case(s, c, {64 * kGiB, "test", 2});
  ASSERT_TRUE(one_host && two_hosts);
  EXPECT_EQ(one_host->plan["ranks_on_host"], 2);
  EXPECT_EQ(two_hosts->plan["ranks_on_host"], 1);
  EXPECT_EQ(one_host->plan["needed_bytes"].get<double>(), 2 * two_hosts->plan["needed_bytes"].get<double>());
  EXPECT_EQ(one_host->verdict.rfind("fits: 2 ranks of this case on one host need ", 0), 0u) << one_host->verdict;
  // Too little memory for both: infeasible, and not even batch_size 1 is offered when the
  // weights alone do not fit.
  const double per_rank = two_hosts->plan["needed_bytes"].get<double>();
  EXPECT_FALSE(plan_cpu_engine_case(s, c, {static_cast<std::int64_t>(1.5 * per_rank), "test", 1})->feasible);
  const auto tiny = plan_cpu_engine_case(s, c, {1024, "test", 1});
  EXPECT_NE(tiny->verdict.find("not even batch_size 1 fits"), std::string::npos) << tiny->verdict;
}

// The CPU scenarios tpbench ships fit in 1 GiB: planning changes nothing for them.
TEST(CpuPlan, ShippedCpuScenariosFitAGiB) {
  for (const char* name : {"quickstart-cpu", "conformance/cpu-engine-decode", "conformance/cpu-engine-observer"}) {
    const Scenario s = load_scenario(std::string(TPB_SOURCE_DIR) + "/scenarios/" + name + ".json");
    for (const Case& c : expand_cases(s, cpu_machine())) {
      const auto p = plan_cpu_engine_case(s, c, {kGiB, "test", 1});
      ASSERT_TRUE(p) << name;
      EXPECT_TRUE(p->feasible) << name << " " << c.label << ": " << p->verdict;
    }
  }
}

TEST(CpuPlan, TheRunPlansCpuCasesOnTheHostAndAllreduceCasesNot) {
  const Scenario engine = cpu_scenario(R"({"tp": [1], "batch_size": [1], "seq_len": [16], "allreduce": ["shm"]})");
  const CasePlanner given = case_planner(engine, HostMemory{2 * kGiB, "--cpu-mem-gib 2"}, 1);
  ASSERT_TRUE(given.host);
  EXPECT_FALSE(given.gpu);
  EXPECT_EQ(given.host->memory_bytes, 2 * kGiB);
  EXPECT_EQ(given.host->memory_source, "--cpu-mem-gib 2");
  const CasePlanner read = case_planner(engine, std::nullopt, 3);
  ASSERT_TRUE(read.host) << "this host's memory could not be read";
  EXPECT_GT(read.host->memory_bytes, 0);
  EXPECT_EQ(read.host->hosts, 3);
  const Case c = expand_cases(engine, cpu_machine()).front();
  EXPECT_TRUE(given.plan(engine, c));
  Case skipped = c;
  skipped.skip_reason = "not here";
  EXPECT_FALSE(given.plan(engine, skipped));
  const Scenario allreduce = load_scenario(std::string(TPB_SOURCE_DIR) + "/scenarios/ci-smoke.json");
  const CasePlanner none = case_planner(allreduce, HostMemory{2 * kGiB, "--cpu-mem-gib 2"}, 1);
  EXPECT_FALSE(none.host);
  EXPECT_FALSE(none.gpu);
}

TEST(HostMemory, MemAvailableAndTheCgroupsRoom) {
  EXPECT_EQ(meminfo_available_bytes("MemTotal:       24413356 kB\nMemFree:  1 kB\nMemAvailable:   23885516 kB\n"),
            std::int64_t{23885516} * 1024);
  EXPECT_FALSE(meminfo_available_bytes("MemTotal: 1 kB\n"));
  EXPECT_FALSE(meminfo_available_bytes("MemAvailable: lots\n"));
  EXPECT_FALSE(meminfo_available_bytes("MemAvailable: 99999999999999999999999 kB\n"));
  EXPECT_EQ(cgroup_room_bytes("1000\n", "300\n"), 700);
  EXPECT_EQ(cgroup_room_bytes("100\n", "300\n"), 0);  // over the limit already: no room
  EXPECT_FALSE(cgroup_room_bytes("max\n", "300\n"));  // v2: no limit
  EXPECT_FALSE(cgroup_room_bytes("9223372036854771712\n", "300\n"));  // v1: no limit
  EXPECT_FALSE(cgroup_room_bytes("", ""));
  const auto here = available_host_memory();
  ASSERT_TRUE(here) << "/proc/meminfo could not be read";
  EXPECT_GT(here->bytes, 0);
  EXPECT_FALSE(here->source.empty());
}

}  // namespace
}  // namespace tpb
