// Sweep expansion: counts, order, exclude rules, control first and last, repeats for the
// deterministic check, skip reasons, and ids that are stable and distinct.
#include <gtest/gtest.h>

#include <set>

#include "suite/checks/check.h"
#include "suite/scenario/sweep.h"
#include "tpb/fnv1a.h"

namespace tpb {
namespace {

using nlohmann::json;

Scenario scenario(const json& doc, bool cuda = false) { return parse_scenario(doc, "t.json", ScenarioEnv{cuda}); }

json base() {
  return json::parse(R"({"schema": 1, "name": "s", "workload": "allreduce", "device": "cpu",
                         "sweep": {"tp": [1, 2, 4], "dtype": ["bf16", "f32"], "message_bytes": [1024, 4096]}})");
}

MachineInfo cpu_machine() { return MachineInfo{false, 0, {"shm"}}; }

TEST(Sweep, CartesianCountAndOrder) {
  const auto cases = expand_cases(scenario(base()), cpu_machine());
  ASSERT_EQ(cases.size(), 3u * 2u * 2u);
  // TP is the outermost axis: the first four cases share tp 1 (one worker group).
  for (int i = 0; i < 4; ++i) EXPECT_EQ(cases[i].tp, 1);
  EXPECT_EQ(cases[4].tp, 2);
  EXPECT_EQ(cases[0].params["dtype"], "bf16");
  EXPECT_EQ(cases[0].params["message_bytes"], 1024);
  EXPECT_EQ(cases[1].params["message_bytes"], 4096);
  EXPECT_EQ(cases[0].label, "allreduce tp1 1KiB bf16 shm");
  EXPECT_EQ(cases[0].group_key, cases[3].group_key);
  EXPECT_NE(cases[0].group_key, cases[4].group_key);
  for (const auto& c : cases) EXPECT_EQ(c.skip_reason, "") << c.label;
}

// Both engine modes in one scenario: each combination runs decode then prefill, TP still
// outermost (one worker group per TP), with distinct ids and labels that say the mode.
TEST(Sweep, EngineModesInnermost) {
  json doc = json::parse(R"({"schema": 1, "name": "e", "workload": "engine", "device": "cpu",
                             "model": {"preset": "tiny-dsv3"}, "mode": ["decode", "prefill"],
                             "sweep": {"tp": [1, 2], "batch_size": [1], "seq_len": [16], "allreduce": ["shm"]}})");
  const auto cases = expand_cases(scenario(doc), cpu_machine());
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_EQ(cases[0].label, "decode tp1 b1 s16 shm");
  EXPECT_EQ(cases[1].label, "prefill tp1 b1 s16 shm");
  EXPECT_EQ(cases[2].label, "decode tp2 b1 s16 shm");
  EXPECT_EQ(cases[1].params["mode"], "prefill");
  EXPECT_EQ(cases[0].group_key, cases[1].group_key);
  EXPECT_NE(cases[0].id, cases[1].id);
  // A one-mode scenario keeps the ids it had (params.mode was always in them).
  doc["mode"] = "decode";
  EXPECT_EQ(expand_cases(scenario(doc), cpu_machine())[0].id, cases[0].id);
}

TEST(Sweep, IdsAreStableDistinctAndHex) {
  const auto a = expand_cases(scenario(base()), cpu_machine());
  const auto b = expand_cases(scenario(base()), cpu_machine());
  std::set<std::string> ids;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    EXPECT_EQ(a[i].id.size(), 16u);
    EXPECT_EQ(a[i].id.find_first_not_of("0123456789abcdef"), std::string::npos);
    ids.insert(a[i].id);
  }
  EXPECT_EQ(ids.size(), a.size());
}

TEST(Sweep, IdDoesNotDependOnKeyOrderAxisOrderOrMeasure) {
  const auto a = expand_cases(scenario(base()), cpu_machine());
  json reordered = json::parse(R"({"sweep": {"message_bytes": [4096, 1024], "dtype": ["f32", "bf16"], "tp": [4, 2, 1]},
      "device": "cpu", "workload": "allreduce", "name": "renamed", "schema": 1, "measure": {"iterations": 99}})");
  const auto b = expand_cases(scenario(reordered), cpu_machine());
  std::set<std::string> ida, idb;
  for (const auto& c : a) ida.insert(c.id);
  for (const auto& c : b) idb.insert(c.id);
  EXPECT_EQ(ida, idb);
}

TEST(Sweep, IdChangesWithParamsModelAndSeed) {
  json doc = base();
  const std::string id = expand_cases(scenario(doc), cpu_machine())[0].id;
  doc["model"] = {{"preset", "tiny-dsv3"}, {"seed", 1}};
  const std::string with_model = expand_cases(scenario(doc), cpu_machine())[0].id;
  doc["model"]["seed"] = 2;
  const std::string other_seed = expand_cases(scenario(doc), cpu_machine())[0].id;
  EXPECT_NE(id, with_model);
  EXPECT_NE(with_model, other_seed);
  // A known value, so that an accidental change of the hashing shows up here.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
}

TEST(Sweep, ExcludeRulesDropMatchingCases) {
  json doc = base();
  doc["exclude"] = {{{"tp", 1}, {"dtype", "f32"}}, {{"message_bytes", {4096}}, {"tp", {2, 4}}}};
  const auto cases = expand_cases(scenario(doc), cpu_machine());
  // 12 - (tp1,f32: 2) - (4096 at tp 2 or 4: 4) = 6
  EXPECT_EQ(cases.size(), 6u);
  for (const auto& c : cases) {
    EXPECT_FALSE(c.tp == 1 && c.params["dtype"] == "f32") << c.label;
    EXPECT_FALSE(c.tp > 1 && c.params["message_bytes"] == 4096) << c.label;
  }
}

// An engine rule may name the mode: it drops that mode of the matching cases only (the
// default GPU scenario leaves the custom backends out of prefill, whose messages exceed them).
TEST(Sweep, ExcludeRuleNamingAModeDropsThatModeOnly) {
  json doc = json::parse(R"({"schema": 1, "name": "e", "workload": "engine", "device": "cpu",
                             "model": {"preset": "tiny-dsv3"}, "mode": ["decode", "prefill"],
                             "sweep": {"tp": [1, 2], "batch_size": [1], "seq_len": [16], "allreduce": ["shm"]},
                             "exclude": [{"mode": "prefill", "tp": 2}]})");
  const auto cases = expand_cases(scenario(doc), cpu_machine());
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].label, "decode tp1 b1 s16 shm");
  EXPECT_EQ(cases[1].label, "prefill tp1 b1 s16 shm");
  EXPECT_EQ(cases[2].label, "decode tp2 b1 s16 shm");
  doc["exclude"] = {{{"mode", {"prefill", "decode"}}}};
  EXPECT_THROW(expand_cases(scenario(doc), cpu_machine()), ScenarioError);
}

TEST(Sweep, ExcludingEverythingIsAnInputError) {
  json doc = base();
  doc["exclude"] = {{{"allreduce", "shm"}}};
  EXPECT_THROW(expand_cases(scenario(doc), cpu_machine()), ScenarioError);
}

TEST(Sweep, ControlRunsFirstAndLastWithItsOwnIds) {
  json doc = base();
  doc["control"] = {{"tp", 2}};
  const auto cases = expand_cases(scenario(doc), cpu_machine());
  ASSERT_EQ(cases.size(), 12u + 2u);
  EXPECT_EQ(cases.front().role, "control-start");
  EXPECT_EQ(cases.back().role, "control-end");
  EXPECT_EQ(cases.front().params, cases.back().params);
  EXPECT_NE(cases.front().id, cases.back().id);
  EXPECT_EQ(cases.front().tp, 2);
}

TEST(Sweep, DeterministicCheckRepeatsEveryCaseRightAfterIt) {
  json doc = base();
  doc["checks"] = {"deterministic"};
  const auto cases = expand_cases(scenario(doc), cpu_machine());
  ASSERT_EQ(cases.size(), 24u);
  for (std::size_t i = 0; i < cases.size(); i += 2) {
    EXPECT_EQ(cases[i].role, "sweep");
    EXPECT_EQ(cases[i + 1].role, "repeat");
    EXPECT_EQ(cases[i].params, cases[i + 1].params);
    EXPECT_EQ(cases[i].group_key, cases[i + 1].group_key);
  }
}

// The check table says which checks need a repeated case; today only deterministic does.
TEST(Sweep, RepeatsFollowTheCheckTable) {
  for (const auto& name : known_check_names()) {
    json doc = base();
    doc["checks"] = {name};
    const CheckInfo* check = find_check(name);
    ASSERT_NE(check, nullptr) << name;
    EXPECT_EQ(check->needs_repeat, name == "deterministic") << name;
    EXPECT_EQ(expand_cases(scenario(doc), cpu_machine()).size(), check->needs_repeat ? 24u : 12u) << name;
  }
  EXPECT_EQ(find_check("no_such_check"), nullptr);
}

TEST(Sweep, CasesTheMachineCannotRunAreSkippedWithAReason) {
  json doc = base();
  doc["device"] = "auto";
  doc["sweep"]["allreduce"] = {"shm", "nccl"};
  // On the CPU: nccl skipped.
  auto cases = expand_cases(scenario(doc, false), cpu_machine());
  for (const auto& c : cases) {
    if (c.params["allreduce"] == "nccl")
      EXPECT_NE(c.skip_reason.find("needs GPUs"), std::string::npos) << c.skip_reason;
    else
      EXPECT_EQ(c.skip_reason, "");
  }
  // On one GPU: shm skipped (a CPU backend), nccl at tp > 1 skipped (too few GPUs).
  cases = expand_cases(scenario(doc, true), MachineInfo{true, 1, {"shm", "nccl"}});
  for (const auto& c : cases) {
    if (c.params["allreduce"] == "shm")
      EXPECT_NE(c.skip_reason.find("CPU backend"), std::string::npos) << c.skip_reason;
    else if (c.tp > 1)
      EXPECT_NE(c.skip_reason.find("needs " + std::to_string(c.tp) + " GPUs, 1 visible"), std::string::npos) << c.skip_reason;
    else
      EXPECT_EQ(c.skip_reason, "");
  }
  // A backend not compiled in.
  cases = expand_cases(scenario(base()), MachineInfo{false, 0, {}});
  EXPECT_NE(cases[0].skip_reason.find("not compiled into this tpbench"), std::string::npos);
}

// How the ranks start decides what runs (issue 19): mpi only under an MPI launcher; a host-local
// backend not in a group that spans virtual hosts (a group of one is on one host); GPU ranks of
// a job one per GPU on each host, so shared placement stays the fork launcher's and this host's
// GPU count does not limit a job's TP.
TEST(Sweep, TheLauncherAndVirtualHostsDecideWhatRuns) {
  json doc = base();
  doc["sweep"] = {{"tp", {1, 2}}, {"allreduce", {"shm", "mpi"}}, {"dtype", {"f32"}}, {"message_bytes", {1024}}};
  MachineInfo m{false, 0, {"shm", "mpi"}};
  auto skip = [&](int tp, const std::string& backend) {
    for (const auto& c : expand_cases(scenario(doc), m))
      if (c.tp == tp && c.params["allreduce"] == backend) return c.skip_reason;
    ADD_FAILURE() << "no case tp" << tp << " " << backend;
    return std::string();
  };
  EXPECT_EQ(skip(2, "mpi"), "backend mpi needs ranks started by MPI: run with --launcher mpirun (or srun in a Slurm allocation)");
  EXPECT_EQ(skip(2, "shm"), "");
  m.launcher = LauncherKind::mpirun;
  m.virtual_hosts = 2;
  EXPECT_EQ(skip(2, "mpi"), "");
  EXPECT_EQ(skip(1, "shm"), "");
  EXPECT_EQ(skip(2, "shm"), "shm works only within one host, and this group of 2 ranks spans 2 hosts (rank 0 on vhost0, rank 1 on "
                            "vhost1); backends that cross hosts: mpi");

  json gpu = base();
  gpu["device"] = "cuda";
  gpu["sweep"] = {{"tp", {4}}, {"allreduce", {"nccl"}}, {"dtype", {"bf16"}}, {"message_bytes", {1024}}};
  const MachineInfo one_gpu_mpirun{true, 1, {"nccl"}, LauncherKind::mpirun};
  EXPECT_EQ(expand_cases(scenario(gpu, true), one_gpu_mpirun)[0].skip_reason, "");
  gpu["placement"] = "shared";
  EXPECT_EQ(expand_cases(scenario(gpu, true), one_gpu_mpirun)[0].skip_reason,
            "shared placement packs the ranks onto this host's GPUs, which only --launcher fork does; --launcher mpirun places "
            "one rank per GPU on each host");
  EXPECT_EQ(expand_cases(scenario(gpu, true), MachineInfo{true, 1, {"nccl"}})[0].skip_reason, "");  // fork packs them
}

// quant sits after TP (another quantization is another engine), and with model.layers joins
// every case's params, its label and so its id; the control's too. The ranks read both from
// the params (case_plan.h: case_model_params).
TEST(Sweep, QuantAndLayersJoinParamsLabelsAndIds) {
  json doc = json::parse(R"({"schema": 1, "name": "e", "workload": "engine", "device": "cpu",
                             "model": {"preset": "tiny-dsv3", "layers": 2},
                             "sweep": {"tp": [1, 2], "quant": ["bf16", "int4"], "batch_size": [1, 4]},
                             "control": {"tp": 2}})");
  const Scenario s = scenario(doc);
  const auto cases = expand_cases(s, cpu_machine());
  ASSERT_EQ(cases.size(), 2u + 2u * 2u * 2u);
  EXPECT_EQ(cases[0].role, "control-start");
  EXPECT_EQ(cases[0].params["quant"], "bf16");  // the first value
  EXPECT_EQ(cases[0].params["layers"], 2);
  EXPECT_EQ(cases[1].label, "decode tp1 b1 s16 L2 bf16 shm");
  EXPECT_EQ(cases[2].label, "decode tp1 b4 s16 L2 bf16 shm");
  EXPECT_EQ(cases[3].label, "decode tp1 b1 s16 L2 int4 shm");
  std::set<std::string> ids;
  for (const auto& c : cases) {
    EXPECT_EQ(c.params["layers"], 2) << c.label;
    ids.insert(c.id);
    const json spec = case_spec(s, c).to_json();
    EXPECT_EQ(spec["params"]["quant"], c.params["quant"]) << c.label;
    EXPECT_EQ(spec["params"]["layers"], 2) << c.label;
  }
  EXPECT_EQ(ids.size(), cases.size());
  EXPECT_EQ(cases[1].group_key, cases[3].group_key);  // one worker group per TP, both quantizations
  // A rule may drop a quantization.
  doc["exclude"] = {{{"quant", "int4"}, {"tp", 2}}};
  EXPECT_EQ(expand_cases(scenario(doc), cpu_machine()).size(), 2u + 2u * 2u * 2u - 2u);
  // Without them: neither key, and the labels of before.
  doc = json::parse(R"({"schema": 1, "name": "e", "workload": "engine", "device": "cpu",
                        "model": {"preset": "tiny-dsv3"}, "sweep": {"tp": [1]}})");
  const auto plain = expand_cases(scenario(doc), cpu_machine());
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].label, "decode tp1 b1 s16 shm");
  EXPECT_EQ(plain[0].params, json::parse(R"({"tp": 1, "mem_fraction": 0.9, "cuda_graph": false, "instrumentation": "off",
                                             "batch_size": 1, "seq_len": 16, "allreduce": "shm", "mode": "decode"})"));
}

TEST(Sweep, CaseSpecFollowsTheWorkloadContract) {
  json doc = base();
  doc["model"] = {{"preset", "tiny-dsv3"}, {"seed", 5}};
  const Scenario s = scenario(doc);
  const auto cases = expand_cases(s, cpu_machine());
  const json spec = case_spec(s, cases[0]).to_json();  // the names the ranks read
  EXPECT_EQ(spec["case_id"], cases[0].id);
  EXPECT_EQ(spec["workload"], "allreduce");
  EXPECT_EQ(spec["device"], "cpu");
  EXPECT_EQ(spec["params"]["message_bytes"], 1024);
  EXPECT_EQ(spec["model"]["seed"], 5);
  EXPECT_TRUE(spec["model"]["config_path"].get<std::string>().ends_with("tiny-dsv3.json"));
  EXPECT_EQ(spec["measure"]["iterations"], 10);
}

}  // namespace
}  // namespace tpb
