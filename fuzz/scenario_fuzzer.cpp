// Fuzz target: a scenario file, read as `tpbench run --dry-run` reads it: load_scenario
// (JSON syntax, schema, model preset or path, overrides, TP against the heads), then the
// sweep expanded for a fixed machine of 8 GPUs with every backend and each case's spec built.
// Seeds: scenarios/**/*.json.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "fuzz/json_mutator.h"
#include "reference_engine/comm/backends.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"

TPB_FUZZ_CUSTOM_MUTATOR(tpb::fuzz::InputFormat::json)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpb::fuzz::write_scratch_file("scenario.json", tpb::fuzz::as_text(data, size));
  tpb::fuzz::expect_only_input_errors([&] {
    tpb::ScenarioEnv env;
    env.cuda_available = true;  // "auto" resolves to cuda: the GPU checks run too
    const tpb::Scenario scenario = tpb::load_scenario(path, env);
    tpb::MachineInfo machine;
    machine.cuda = true;
    machine.gpu_count = 8;
    machine.backends = tpb::available_backends();
    for (const tpb::Case& c : tpb::expand_cases(scenario, machine)) (void)tpb::case_spec(scenario, c).to_json().dump();
  });
  return 0;
}
