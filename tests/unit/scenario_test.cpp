// Scenario parsing and validation: defaults, every kind of problem, all problems at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"
#include "tpb/fnv1a.h"

namespace tpb {
namespace {

using nlohmann::json;

const ScenarioEnv kNoGpu{false};

json minimal_allreduce() {
  return json::parse(R"({"schema": 1, "name": "t", "workload": "allreduce", "device": "cpu",
                         "sweep": {"tp": [1, 2], "message_bytes": [1024]}})");
}

json minimal_engine() {
  return json::parse(R"({"schema": 1, "name": "e", "workload": "engine", "device": "cpu", "mode": "decode",
                         "model": {"preset": "tiny-dsv3"},
                         "sweep": {"tp": [1, 2, 4], "batch_size": [1, 4], "seq_len": [16]}})");
}

// The problems of a document that must not parse.
std::vector<std::string> problems_of(const json& doc) {
  try {
    parse_scenario(doc, "bad.json", kNoGpu);
  } catch (const ScenarioError& e) {
    return e.problems();
  }
  ADD_FAILURE() << "parsed without problems: " << doc.dump();
  return {};
}

// Exactly one problem, at `path`, mentioning `words`.
void expect_one_problem(const json& doc, const std::string& path, const std::string& words) {
  const auto problems = problems_of(doc);
  ASSERT_EQ(problems.size(), 1u) << (problems.empty() ? "" : problems.front());
  EXPECT_EQ(problems[0].rfind("bad.json: " + path + ": ", 0), 0u) << problems[0];
  EXPECT_NE(problems[0].find(words), std::string::npos) << problems[0];
}

const Axis& axis(const Scenario& s, const std::string& name) {
  auto it = std::find_if(s.axes.begin(), s.axes.end(), [&](const Axis& a) { return a.name == name; });
  EXPECT_NE(it, s.axes.end()) << name;
  return *it;
}

TEST(Scenario, MinimalAllreduceGetsDefaultsInFixedAxisOrder) {
  const Scenario s = parse_scenario(minimal_allreduce(), "t.json", kNoGpu);
  EXPECT_EQ(s.workload, "allreduce");
  EXPECT_EQ(s.device, "cpu");
  std::vector<std::string> names;
  for (const auto& a : s.axes) names.push_back(a.name);
  EXPECT_EQ(names, workload_axis_names("allreduce"));
  EXPECT_EQ(axis(s, "tp").values, (std::vector<json>{1, 2}));
  EXPECT_EQ(axis(s, "allreduce").values, (std::vector<json>{"shm"}));
  EXPECT_EQ(axis(s, "dtype").values, (std::vector<json>{"bf16"}));
  EXPECT_EQ(s.measure.iterations, 10);
  EXPECT_TRUE(s.control.is_null());
  EXPECT_FALSE(s.model.has_value());
}

// The axis table's order and defaults are part of every case id: pinned here.
TEST(Scenario, AxisTableOrderAndDefaults) {
  EXPECT_EQ(workload_axis_names("engine"), (std::vector<std::string>{"tp", "quant", "mem_fraction", "cuda_graph",
                                                                     "instrumentation", "batch_size", "seq_len", "allreduce"}));
  EXPECT_EQ(workload_axis_names("allreduce"), (std::vector<std::string>{"tp", "mem_fraction", "cuda_graph",
                                                                        "instrumentation", "dtype", "message_bytes",
                                                                        "allreduce"}));
  EXPECT_EQ(common_axis_names(),
            (std::vector<std::string>{"tp", "mem_fraction", "cuda_graph", "instrumentation", "allreduce"}));
  EXPECT_TRUE(workload_axis_names("probe").empty());
  const Scenario cpu = parse_scenario(minimal_engine(), "t.json", kNoGpu);
  // quant has no default: a scenario that does not write it has no such axis.
  EXPECT_FALSE(std::any_of(cpu.axes.begin(), cpu.axes.end(), [](const Axis& a) { return a.name == "quant"; }));
  json defaults = json::object();
  for (const auto& a : cpu.axes)
    if (!a.written) defaults[a.name] = a.values.at(0);
  EXPECT_EQ(defaults, json::parse(R"({"mem_fraction": 0.9, "cuda_graph": false, "instrumentation": "off",
                                      "allreduce": "shm"})"));
  json doc = minimal_allreduce();
  doc["device"] = "cuda";
  doc["sweep"] = json::object();
  defaults = json::object();
  for (const auto& a : parse_scenario(doc, "t.json", kNoGpu).axes) defaults[a.name] = a.values.at(0);
  EXPECT_EQ(defaults, json::parse(R"({"tp": 1, "mem_fraction": 0.9, "cuda_graph": false, "instrumentation": "off",
                                      "dtype": "bf16", "message_bytes": 65536, "allreduce": "nccl"})"));
}

TEST(Scenario, EngineWithPresetReadsTheHeads) {
  const Scenario s = parse_scenario(minimal_engine(), "t.json", kNoGpu);
  ASSERT_TRUE(s.model.has_value());
  EXPECT_EQ(s.model->num_attention_heads, 4);
  EXPECT_TRUE(std::filesystem::is_regular_file(s.model->config_path)) << s.model->config_path;
  EXPECT_EQ(s.modes, std::vector<std::string>{"decode"});
}

TEST(Scenario, ModeIsOneOrBoth) {
  json doc = minimal_engine();
  doc["mode"] = {"decode", "prefill"};
  EXPECT_EQ(parse_scenario(doc, "t.json", kNoGpu).modes, (std::vector<std::string>{"decode", "prefill"}));
  doc["mode"] = "prefill";
  EXPECT_EQ(parse_scenario(doc, "t.json", kNoGpu).modes, std::vector<std::string>{"prefill"});
  for (const json& bad : {json::array(), json({"decode", "decode"}), json({"decode", "logits"}), json(3)}) {
    doc["mode"] = bad;
    EXPECT_THROW(parse_scenario(doc, "t.json", kNoGpu), ScenarioError) << bad.dump();
  }
}

TEST(Scenario, AutoDeviceResolvesByCudaAvailability) {
  json doc = minimal_allreduce();
  doc["device"] = "auto";
  doc["sweep"]["allreduce"] = {"shm", "nccl"};  // a GPU backend is fine with auto
  EXPECT_EQ(parse_scenario(doc, "t.json", ScenarioEnv{false}).device, "cpu");
  EXPECT_EQ(parse_scenario(doc, "t.json", ScenarioEnv{true}).device, "cuda");
}

TEST(Scenario, NormalisesDtypeAliasesAndFractions) {
  json doc = minimal_allreduce();
  doc["sweep"]["dtype"] = {"bfloat16", "float32"};
  doc["sweep"]["mem_fraction"] = {1};
  const Scenario s = parse_scenario(doc, "t.json", kNoGpu);
  EXPECT_EQ(axis(s, "dtype").values, (std::vector<json>{"bf16", "f32"}));
  ASSERT_EQ(axis(s, "mem_fraction").values.size(), 1u);
  EXPECT_TRUE(axis(s, "mem_fraction").values[0].is_number_float());
}

TEST(Scenario, UnknownTopLevelKey) {
  json doc = minimal_allreduce();
  doc["sweeps"] = json::object();
  expect_one_problem(doc, "$.sweeps", "unknown key");
}

TEST(Scenario, WrongTypeInAxis) {
  json doc = minimal_allreduce();
  doc["sweep"]["tp"] = {1, "2"};
  expect_one_problem(doc, "$.sweep.tp[1]", "expected a positive integer, got \"2\"");
}

TEST(Scenario, MemFractionOutsideZeroOne) {
  for (double bad : {0.0, -0.5, 1.5}) {
    json doc = minimal_allreduce();
    doc["sweep"]["mem_fraction"] = {0.5, bad};
    expect_one_problem(doc, "$.sweep.mem_fraction[1]", "(0, 1]");
  }
  json ok = minimal_allreduce();
  ok["sweep"]["mem_fraction"] = {1.0, 0.01};
  EXPECT_NO_THROW(parse_scenario(ok, "t.json", kNoGpu));
}

TEST(Scenario, BatchZero) {
  json doc = minimal_engine();
  doc["sweep"]["batch_size"] = {0};
  expect_one_problem(doc, "$.sweep.batch_size[0]", "positive integer");
}

TEST(Scenario, TpThatDoesNotDivideTheHeads) {
  json doc = minimal_engine();
  doc["sweep"]["tp"] = {1, 3};
  expect_one_problem(doc, "$.sweep.tp[1]", "num_attention_heads");
}

TEST(Scenario, TpCheckedAfterOverrides) {
  json doc = minimal_engine();
  doc["sweep"]["tp"] = {8};  // tiny-dsv3 has 4 heads
  expect_one_problem(doc, "$.sweep.tp[0]", "num_attention_heads");
  doc["model"]["overrides"] = {{"num_attention_heads", 8}, {"num_key_value_heads", 8}};
  EXPECT_NO_THROW(parse_scenario(doc, "t.json", kNoGpu));
}

TEST(Scenario, EmptyAxis) {
  json doc = minimal_allreduce();
  doc["sweep"]["message_bytes"] = json::array();
  expect_one_problem(doc, "$.sweep.message_bytes", "non-empty list");
}

TEST(Scenario, UnknownBackend) {
  json doc = minimal_allreduce();
  doc["sweep"]["allreduce"] = {"shm", "gloo"};
  expect_one_problem(doc, "$.sweep.allreduce[1]", "allreduce backend");
}

// The test-only planted row is no backend without its switch (factory.cpp), and the problem
// lists the ones there are (mpi among them: a row even where this build lacks MPI).
TEST(Scenario, PlantedIsNotABackendWithoutTheSwitch) {
  json doc = minimal_allreduce();
  doc["sweep"]["allreduce"] = {"shm", "planted"};
  const auto problems = problems_of(doc);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "bad.json: $.sweep.allreduce[1]: expected an allreduce backend (one of shm, mpi, nccl, custom-oneshot, "
            "custom-twoshot, auto), got \"planted\"");
  doc["sweep"]["allreduce"] = {"shm"};
  doc["exclude"] = {{{"allreduce", "planted"}}};
  expect_one_problem(doc, "$.exclude[0].allreduce", "allreduce backend (one of shm, mpi, nccl,");
}

TEST(Scenario, GpuBackendOnExplicitCpuIsAnError) {
  json doc = minimal_allreduce();
  doc["sweep"]["allreduce"] = {"nccl"};
  expect_one_problem(doc, "$.sweep.allreduce[0]", "device is \"cpu\"");
}

TEST(Scenario, UnknownCheck) {
  json doc = minimal_allreduce();
  doc["checks"] = {"deterministic", "bitwise_magic"};
  expect_one_problem(doc, "$.checks[1]", "check name");
}

TEST(Scenario, AxisOfTheOtherWorkload) {
  json doc = minimal_allreduce();
  doc["sweep"]["batch_size"] = {1};
  expect_one_problem(doc, "$.sweep.batch_size", "not an axis of workload \"allreduce\"");
}

TEST(Scenario, MessageSizeMustHoldWholeElements) {
  json doc = minimal_allreduce();
  doc["sweep"]["dtype"] = {"bf16", "f32"};
  doc["sweep"]["message_bytes"] = {1028, 1026};
  expect_one_problem(doc, "$.sweep.message_bytes[1]", "multiple of 4");
}

TEST(Scenario, DuplicateAxisValue) {
  json doc = minimal_allreduce();
  doc["sweep"]["tp"] = {2, 2};
  expect_one_problem(doc, "$.sweep.tp[1]", "not already listed");
}

TEST(Scenario, EngineNeedsAModelAndUnknownPresetIsNamed) {
  json doc = minimal_engine();
  doc.erase("model");
  expect_one_problem(doc, "$.model", "missing");
  doc["model"] = {{"preset", "no-such-model"}};
  expect_one_problem(doc, "$.model.preset", "tiny-dsv3");  // lists the presets there are
}

TEST(Scenario, BadMeasureBaselineControlExclude) {
  json doc = minimal_allreduce();
  doc["measure"] = {{"iterations", 0}, {"timeout_s", 5}};
  expect_one_problem(doc, "$.measure.iterations", ">= 1");
  doc = minimal_allreduce();
  doc["baseline"] = {{"alpha", 1.0}, {"latency", "informational"}};
  expect_one_problem(doc, "$.baseline.alpha", "(0, 1)");
  doc["baseline"] = {{"latency", "ignored"}};
  expect_one_problem(doc, "$.baseline.latency", "informational");
  doc = minimal_allreduce();
  doc["control"] = {{"tpp", 1}};
  expect_one_problem(doc, "$.control.tpp", "unknown axis");
  doc = minimal_allreduce();
  doc["exclude"] = {{{"tp", 1}, {"colour", "red"}}};
  expect_one_problem(doc, "$.exclude[0].colour", "unknown axis");
  // "mode" is an engine rule's key only, and names the modes there are.
  doc["exclude"] = {{{"mode", "prefill"}}};
  expect_one_problem(doc, "$.exclude[0].mode", "unknown axis");
}

// A model the GPU engine's attention cannot hold is refused when the scenario is read, naming
// the field, not on the GPU in the middle of a run. The CPU engine takes it.
TEST(Scenario, CudaScenarioRefusesAModelBeyondTheGpuAttention) {
  json doc = json::parse(R"({"schema": 1, "name": "e", "workload": "engine", "device": "cuda",
                             "model": {"preset": "tiny-dsv3", "overrides": {"v_head_dim": 160}},
                             "sweep": {"tp": [1], "batch_size": [1], "seq_len": [16], "allreduce": ["nccl"]}})");
  std::vector<std::string> problems;
  try {
    parse_scenario(doc, "bad.json", ScenarioEnv{true});
  } catch (const ScenarioError& e) {
    problems = e.problems();
  }
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("bad.json: $.model.preset: ", 0), 0u) << problems[0];
  EXPECT_NE(problems[0].find("v_head_dim: 160"), std::string::npos) << problems[0];
  doc["device"] = "cpu";
  doc["sweep"]["allreduce"] = {"shm"};
  EXPECT_NO_THROW(parse_scenario(doc, "ok.json", kNoGpu));
}

TEST(Scenario, ExcludeRuleModeNamesAnEngineMode) {
  json doc = json::parse(R"({"schema": 1, "name": "e", "workload": "engine", "device": "cpu",
                             "model": {"preset": "tiny-dsv3"}, "mode": ["decode", "prefill"],
                             "sweep": {"tp": [1], "batch_size": [1], "seq_len": [16], "allreduce": ["shm"]}})");
  doc["exclude"] = {{{"mode", "warmup"}}};
  expect_one_problem(doc, "$.exclude[0].mode", "\"prefill\", \"decode\"");
  doc["exclude"] = {{{"mode", json::array()}}};
  expect_one_problem(doc, "$.exclude[0].mode", "\"prefill\", \"decode\"");
}

TEST(Scenario, ControlFillsUnnamedAxesWithTheirFirstValue) {
  json doc = minimal_allreduce();
  doc["sweep"]["message_bytes"] = {4096, 1024};
  doc["control"] = {{"tp", 2}};
  const Scenario s = parse_scenario(doc, "t.json", kNoGpu);
  EXPECT_EQ(s.control["tp"], 2);
  EXPECT_EQ(s.control["message_bytes"], 4096);
  EXPECT_EQ(s.control["allreduce"], "shm");
}

TEST(Scenario, ReportsEveryProblemAtOnce) {
  json doc = json::parse(R"({"schema": 2, "workload": "engine", "device": "gpu", "colour": 1,
    "model": {"preset": "tiny-dsv3"},
    "sweep": {"tp": [3], "batch_size": [0], "mem_fraction": [2], "allreduce": []},
    "checks": ["nope"], "measure": {"warmup": -1}})");
  const auto problems = problems_of(doc);
  const std::vector<std::string> paths = {"$.colour", "$.schema", "$.device", "$.sweep.tp[0]",
                                          "$.sweep.batch_size[0]", "$.sweep.mem_fraction[0]",
                                          "$.sweep.allreduce", "$.checks[0]", "$.measure.warmup"};
  EXPECT_EQ(problems.size(), paths.size());
  for (const auto& path : paths) {
    EXPECT_TRUE(std::any_of(problems.begin(), problems.end(),
                            [&](const std::string& p) { return p.rfind("bad.json: " + path + ": ", 0) == 0; }))
        << "no problem reported at " << path;
  }
}

// ---- "comm": the GPU engine's communicator options --------------------------------------

json gpu_engine() {
  json doc = minimal_engine();
  doc["device"] = "cuda";
  doc["sweep"]["allreduce"] = {"nccl", "custom-oneshot"};
  return doc;
}

TEST(ScenarioComm, CustomMaxBytesIsReadAndOptional) {
  EXPECT_FALSE(parse_scenario(gpu_engine(), "t.json", kNoGpu).comm.written());
  json doc = gpu_engine();
  doc["comm"] = {{"custom_max_bytes", 64 << 20}};
  const Scenario s = parse_scenario(doc, "t.json", kNoGpu);
  ASSERT_TRUE(s.comm.custom_max_bytes.has_value());
  EXPECT_EQ(*s.comm.custom_max_bytes, 64 << 20);
  doc["comm"] = {{"custom_max_bytes", kScenarioCustomMaxBytesLimit}};  // 2 GiB: inclusive
  EXPECT_EQ(*parse_scenario(doc, "t.json", kNoGpu).comm.custom_max_bytes, kScenarioCustomMaxBytesLimit);
  doc["comm"] = json::object();  // an empty section changes nothing
  EXPECT_FALSE(parse_scenario(doc, "t.json", kNoGpu).comm.written());
}

TEST(ScenarioComm, EveryProblemHasItsPath) {
  for (const json& bad : {json(0), json(-1), json(kScenarioCustomMaxBytesLimit + 1), json(8.5), json("8MiB"),
                          json(nullptr)}) {
    json doc = gpu_engine();
    doc["comm"] = {{"custom_max_bytes", bad}};
    expect_one_problem(doc, "$.comm.custom_max_bytes", "an integer number of bytes in [1, 2147483648]");
  }
  json doc = gpu_engine();
  doc["comm"] = {{"custom_max_byte", 1024}};
  expect_one_problem(doc, "$.comm.custom_max_byte", "unknown key; expected one of custom_max_bytes");
  doc["comm"] = 8388608;
  expect_one_problem(doc, "$.comm", "expected an object");
  doc = minimal_allreduce();
  doc["device"] = "cuda";
  doc["sweep"]["allreduce"] = {"nccl"};
  doc["comm"] = {{"custom_max_bytes", 1024}};
  expect_one_problem(doc, "$.comm.custom_max_bytes", "the allreduce workload's comm_max_bytes axis sizes its buffer");
  doc = minimal_engine();  // device cpu
  doc["comm"] = {{"custom_max_bytes", 1024}};
  expect_one_problem(doc, "$.comm", "device is \"cpu\"");
  // Collected with every other problem of the file.
  doc = gpu_engine();
  doc["comm"] = {{"custom_max_bytes", 0}, {"nccl_channels", 4}};
  doc["sweep"]["batch_size"] = {0};
  const auto problems = problems_of(doc);
  EXPECT_EQ(problems.size(), 3u);
}

// The allreduce workload takes the communicator's PCIe rule and timeout (its buffer size is its
// comm_max_bytes axis); both reach its cases' specs.
TEST(ScenarioComm, TheAllreduceWorkloadTakesThePcieRuleAndTheTimeout) {
  json doc = minimal_allreduce();
  doc["device"] = "cuda";
  doc["sweep"]["allreduce"] = {"nccl", "custom-oneshot"};
  doc["comm"] = {{"custom_on_pcie", true}, {"custom_timeout_s", 5}};
  const Scenario s = parse_scenario(doc, "t.json", kNoGpu);
  ASSERT_TRUE(s.comm.custom_on_pcie.has_value());
  EXPECT_TRUE(*s.comm.custom_on_pcie);
  EXPECT_EQ(s.comm.custom_timeout_s, 5.0);
  doc["comm"] = {{"custom_on_pcie", "yes"}};
  expect_one_problem(doc, "$.comm.custom_on_pcie", "true or false");
}

// A case id covers the comm section only when the scenario writes it: without it every id is
// the one earlier tpbench versions gave (workload, model, device, params, role), and with it
// every id changes, as does the case spec the ranks receive.
TEST(ScenarioComm, CaseIdsChangeOnlyWhenWritten) {
  const MachineInfo two_gpus = {true, 2, {"nccl", "custom-oneshot"}};
  const Scenario plain = parse_scenario(gpu_engine(), "t.json", kNoGpu);
  const std::vector<Case> before = expand_cases(plain, two_gpus);
  ASSERT_FALSE(before.empty());
  for (const auto& c : before) {
    const json identity = {{"workload", "engine"}, {"model", model_identity(plain)}, {"device", "cuda"},
                           {"params", c.params}, {"role", c.role}};
    char id[17];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(fnv1a64(identity.dump())));
    EXPECT_EQ(c.id, id) << c.label;
    EXPECT_FALSE(case_spec(plain, c).to_json().contains("comm")) << c.label;
  }
  json doc = gpu_engine();
  doc["comm"] = {{"custom_max_bytes", 64 << 20}};
  const Scenario with = parse_scenario(doc, "t.json", kNoGpu);
  const std::vector<Case> after = expand_cases(with, two_gpus);
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].params, before[i].params);
    EXPECT_NE(after[i].id, before[i].id) << after[i].label;
    EXPECT_EQ(case_spec(with, after[i]).to_json()["comm"], json({{"custom_max_bytes", 64 << 20}})) << after[i].label;
  }
  doc["comm"] = {{"custom_max_bytes", 32 << 20}};
  EXPECT_NE(expand_cases(parse_scenario(doc, "t.json", kNoGpu), two_gpus).front().id, after.front().id);
  doc["comm"] = json::object();  // written but empty: nothing set, ids as before
  EXPECT_EQ(expand_cases(parse_scenario(doc, "t.json", kNoGpu), two_gpus).front().id, before.front().id);
}

// ---- "quant": the model's quantization, a sweep axis of the engine ----------------------

// A checkpoint folder holding tiny-dsv3's config, with Kimi-K2.5's quantization_config when
// `int4` (what the config reader reads as Quantization::int4); removed with the object.
struct Checkpoint {
  std::filesystem::path dir;
  explicit Checkpoint(bool int4) {
    dir = std::filesystem::temp_directory_path() /
          ("tpb_scenario_ckpt_" + std::to_string(::getpid()) + (int4 ? "_int4" : "_bf16"));
    std::filesystem::create_directories(dir);
    json config = json::parse(std::ifstream(std::string(TPB_SOURCE_DIR) + "/scenarios/models/tiny-dsv3.json"));
    if (int4) {
      const json kimi = json::parse(std::ifstream(std::string(TPB_SOURCE_DIR) + "/scenarios/models/kimi-k2.5.json"));
      config["quantization_config"] = kimi["text_config"].contains("quantization_config")
                                          ? kimi["text_config"]["quantization_config"]
                                          : kimi["quantization_config"];
    }
    std::ofstream(dir / "config.json") << config.dump(2);
  }
  ~Checkpoint() { std::filesystem::remove_all(dir); }
  // An engine scenario on this checkpoint (config and weights) sweeping `quant`.
  json scenario(const json& quant) const {
    json doc = minimal_engine();
    doc["model"] = {{"path", dir.string()}, {"weights", dir.string()}};
    doc["sweep"]["quant"] = quant;
    return doc;
  }
};

TEST(ScenarioQuant, AnAxisOfTheEngineNormalisedAndOnlyWhenWritten) {
  EXPECT_FALSE(axis_written(parse_scenario(minimal_engine(), "t.json", kNoGpu), "quant"));
  json doc = minimal_engine();
  doc["sweep"]["quant"] = {"int4", "bf16"};
  const Scenario s = parse_scenario(doc, "t.json", kNoGpu);
  EXPECT_TRUE(axis_written(s, "quant"));
  EXPECT_EQ(axis(s, "quant").values, (std::vector<json>{"int4", "bf16"}));  // in the order written
  doc["device"] = "cuda";  // both devices: INT4 W4A16 on the GPU, exact dequantized values on the CPU
  doc["sweep"]["allreduce"] = {"nccl"};
  EXPECT_EQ(axis(parse_scenario(doc, "t.json", kNoGpu), "quant").values, (std::vector<json>{"int4", "bf16"}));
}

TEST(ScenarioQuant, OnlyBf16AndInt4AreAModelsQuantization) {
  for (const json& bad : {json("fp8"), json("f32"), json("fp32"), json("INT4"), json("int8"), json(4), json(nullptr)}) {
    json doc = minimal_engine();
    doc["sweep"]["quant"] = {"bf16", bad};
    expect_one_problem(doc, "$.sweep.quant[1]", "expected \"bf16\" or \"int4\" (int4: the routed experts INT4");
  }
  json doc = minimal_engine();
  doc["sweep"]["quant"] = {"int4", "int4"};
  expect_one_problem(doc, "$.sweep.quant[1]", "a value not already listed");
  doc["sweep"]["quant"] = "int4";
  expect_one_problem(doc, "$.sweep.quant", "a list of values");
  doc = minimal_allreduce();
  doc["sweep"]["quant"] = {"int4"};
  expect_one_problem(doc, "$.sweep.quant", "not an axis of workload \"allreduce\"");
  // Rules and the control name it as any axis.
  doc = minimal_engine();
  doc["sweep"]["quant"] = {"bf16", "int4"};
  doc["exclude"] = {{{"quant", "fp8"}}};
  expect_one_problem(doc, "$.exclude[0].quant", "\"bf16\" or \"int4\"");
  doc.erase("exclude");
  doc["control"] = {{"quant", "f32"}};
  expect_one_problem(doc, "$.control.quant", "\"bf16\" or \"int4\"");
  doc["control"] = {{"quant", "int4"}};
  EXPECT_EQ(parse_scenario(doc, "t.json", kNoGpu).control["quant"], "int4");
}

// A checkpoint is loaded as its config says: a scenario naming the other quantization is
// refused when it is read, at the value's path; synthetic weights take either.
TEST(ScenarioQuant, ACheckpointsOwnQuantizationWins) {
  const Checkpoint bf16(false), int4(true);
  EXPECT_NO_THROW(parse_scenario(bf16.scenario({"bf16"}), "t.json", kNoGpu));
  EXPECT_NO_THROW(parse_scenario(int4.scenario({"int4"}), "t.json", kNoGpu));
  expect_one_problem(bf16.scenario({"bf16", "int4"}), "$.sweep.quant[1]",
                     "expected \"bf16\" (the checkpoint " + bf16.dir.string() + " holds bf16 weights");
  expect_one_problem(int4.scenario({"bf16"}), "$.sweep.quant[0]",
                     "expected \"int4\" (the checkpoint " + int4.dir.string() + " holds int4 weights");
  EXPECT_NE(problems_of(int4.scenario({"bf16"}))[0].find("a checkpoint's own quantization wins"), std::string::npos);
  json doc = int4.scenario({"int4"});
  doc["control"] = {{"quant", "bf16"}};
  expect_one_problem(doc, "$.control.quant", "holds int4 weights");
  doc = int4.scenario({"bf16", "int4"});
  doc["model"]["weights"] = "synthetic";  // the same config, weights made in either
  EXPECT_NO_THROW(parse_scenario(doc, "t.json", kNoGpu));
  // Without the axis a checkpoint runs as it is.
  doc = int4.scenario({"int4"});
  doc["sweep"].erase("quant");
  EXPECT_NO_THROW(parse_scenario(doc, "t.json", kNoGpu));
}

// ---- model.layers: how many of the model's layers a case runs ---------------------------

TEST(ScenarioLayers, ACountOrAllResolvedAgainstTheConfig) {
  EXPECT_FALSE(parse_scenario(minimal_engine(), "t.json", kNoGpu).model->layers.has_value());
  json doc = minimal_engine();
  doc["model"]["layers"] = 2;
  EXPECT_EQ(parse_scenario(doc, "t.json", kNoGpu).model->layers, 2);
  doc["model"]["layers"] = 3;  // tiny-dsv3's num_hidden_layers: inclusive
  EXPECT_EQ(parse_scenario(doc, "t.json", kNoGpu).model->layers, 3);
  doc["model"]["layers"] = "all";
  EXPECT_EQ(parse_scenario(doc, "t.json", kNoGpu).model->layers, 3);
  // The count the other overrides leave.
  doc["model"]["overrides"] = {{"first_k_dense_replace", 2}};
  doc["model"]["layers"] = 2;
  EXPECT_EQ(parse_scenario(doc, "t.json", kNoGpu).model->layers, 2);
}

TEST(ScenarioLayers, EveryProblemHasItsPath) {
  for (const json& bad : {json(0), json(-1), json(2.5), json("half"), json("ALL"), json(true), json(nullptr),
                          json::array({2})}) {
    json doc = minimal_engine();
    doc["model"]["layers"] = bad;
    expect_one_problem(doc, "$.model.layers", "expected a positive integer (at most the config's num_hidden_layers) or \"all\"");
  }
  json doc = minimal_engine();
  doc["model"]["layers"] = 4;
  expect_one_problem(doc, "$.model.layers", "expected a positive integer at most 3 (the config's num_hidden_layers) or \"all\", got 4");
  // Named and unnamed, the same override: one of the two.
  doc["model"]["layers"] = 2;
  doc["model"]["overrides"] = {{"num_hidden_layers", 2}};
  expect_one_problem(doc, "$.model.layers", "set together with $.model.overrides.num_hidden_layers");
  // Fewer layers than the dense ones the config asks for.
  doc = minimal_engine();
  doc["model"]["overrides"] = {{"first_k_dense_replace", 2}};
  doc["model"]["layers"] = 1;
  expect_one_problem(doc, "$.model.layers", "a layer count the model allows (");
  EXPECT_NE(problems_of(doc)[0].find("first_k_dense_replace"), std::string::npos) << problems_of(doc)[0];
  // The allreduce workload runs no layers.
  doc = minimal_allreduce();
  doc["model"] = {{"preset", "tiny-dsv3"}, {"layers", 2}};
  expect_one_problem(doc, "$.model.layers", "applies to workload \"engine\" only");
}

// Both keys are part of a case's id only when written: without them every id is the one
// earlier tpbench versions gave (workload, model, device, params, role).
TEST(ScenarioQuantAndLayers, CaseIdsChangeOnlyWhenWritten) {
  const MachineInfo cpu = {false, 0, {"shm"}};
  const Scenario plain = parse_scenario(minimal_engine(), "t.json", kNoGpu);
  const std::vector<Case> before = expand_cases(plain, cpu);
  ASSERT_FALSE(before.empty());
  for (const auto& c : before) {
    EXPECT_FALSE(c.params.contains("quant")) << c.label;
    EXPECT_FALSE(c.params.contains("layers")) << c.label;
    const json identity = {{"workload", "engine"}, {"model", model_identity(plain)}, {"device", "cpu"},
                           {"params", c.params}, {"role", c.role}};
    char id[17];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(fnv1a64(identity.dump())));
    EXPECT_EQ(c.id, id) << c.label;
  }
  json doc = minimal_engine();
  doc["sweep"]["quant"] = {"bf16"};  // the value a case without the axis runs, but written
  doc["model"]["layers"] = "all";
  const std::vector<Case> after = expand_cases(parse_scenario(doc, "t.json", kNoGpu), cpu);
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    json params = before[i].params;
    params["quant"] = "bf16";
    params["layers"] = 3;
    EXPECT_EQ(after[i].params, params);
    EXPECT_NE(after[i].id, before[i].id) << after[i].label;
  }
}

TEST(Scenario, SyntaxErrorNamesLineAndColumn) {
  const auto dir = std::filesystem::temp_directory_path() / ("tpb_scenario_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = (dir / "broken.json").string();
  std::ofstream(file) << "{\n  \"schema\": 1,\n  \"name\": oops\n}\n";
  try {
    load_scenario(file, kNoGpu);
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_NE(e.problems()[0].find(file + ":3:"), std::string::npos) << e.problems()[0];
  }
  std::filesystem::remove_all(dir);
}

// Issue 15 path 5: tolerances with 3 repetitions made every latency verdict
// insufficient-data, a 7x slowdown included.
TEST(Scenario, BaselineToleranceNeedsTheTestsRepetitionsOrInformationalLatency) {
  json doc = minimal_allreduce();
  doc["measure"] = {{"repetitions", 3}};
  doc["baseline"] = {{"latency_rel_tol", 0.1}};
  expect_one_problem(doc, "$.measure.repetitions", "needs 9 per side");
  EXPECT_NE(problems_of(doc)[0].find("\"latency\": \"informational\""), std::string::npos);
  doc["baseline"]["min_repetitions"] = 3;  // the scenario's own minimum counts
  EXPECT_NO_THROW(parse_scenario(doc, "ok.json", kNoGpu));
  doc["baseline"] = {{"latency_rel_tol", 0.1}, {"latency", "informational"}};
  EXPECT_NO_THROW(parse_scenario(doc, "ok.json", kNoGpu));
  doc["baseline"] = {{"latency_rel_tol", 0.1}};
  doc["measure"]["repetitions"] = 9;
  EXPECT_NO_THROW(parse_scenario(doc, "ok.json", kNoGpu));
  doc.erase("baseline");  // no tolerances: nothing to judge
  doc["measure"]["repetitions"] = 1;
  EXPECT_NO_THROW(parse_scenario(doc, "ok.json", kNoGpu));
}

TEST(Scenario, ShippedScenariosAreValid) {
  const std::filesystem::path root = std::filesystem::path(TPB_SOURCE_DIR) / "scenarios";
  int count = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    // models/ holds HF configs and qualify/ the profiles of `tpbench qualify`: not run scenarios.
    const std::string folder = e.path().parent_path().filename().string();
    if (e.path().extension() != ".json" || folder == "models" || folder == "qualify") continue;
    ++count;
    for (bool cuda : {false, true}) {
      try {
        load_scenario(e.path().string(), ScenarioEnv{cuda});
      } catch (const ScenarioError& err) {
        ADD_FAILURE() << err.what();
      }
    }
  }
  EXPECT_GE(count, 3);  // quickstart, ci-smoke and at least one conformance scenario
}

TEST(Scenario, ResolvesNamesThroughTheScenariosFolder) {
  const std::string path = resolve_scenario_path("ci-smoke");
  EXPECT_TRUE(std::filesystem::is_regular_file(path)) << path;
  EXPECT_TRUE(path.ends_with("scenarios/ci-smoke.json")) << path;
  EXPECT_THROW(resolve_scenario_path("no-such-scenario-xyz"), InputError);
}

}  // namespace
}  // namespace tpb
