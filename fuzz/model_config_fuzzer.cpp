// Fuzz target: an HF config.json, read as `tpbench plan` reads it (load_model_config:
// JSON, parse_model_config, validate), then planned on one H200 at TP 1, 2 and 8 wherever
// validate_tp accepts the TP. Seeds: scenarios/models/*.json, tests/data/hf/*/config.json.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "fuzz/json_mutator.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/gpu_catalog.h"
#include "reference_engine/memory/planner.h"
#include "tpb/check.h"

TPB_FUZZ_CUSTOM_MUTATOR(tpb::fuzz::InputFormat::json)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpb::fuzz::write_scratch_file("config.json", tpb::fuzz::as_text(data, size));
  tpb::fuzz::expect_only_input_errors([&] {
    const tpb::ModelConfig config = tpb::load_model_config(path);
    config.validate();
    (void)config.parameter_count();
    (void)config.attention_scale();
    const tpb::GpuSpec& gpu = tpb::find_gpu("H200");
    for (int tp : {1, 2, 8}) {
      try {
        config.validate_tp(tp);
      } catch (const tpb::InputError&) {
        continue;
      }
      tpb::PlanInput in;
      in.config = config;
      in.tp = tp;
      in.gpu_total_bytes = gpu.total_bytes;
      in.cuda_context_bytes = gpu.cuda_context_bytes;
      in.graph_batch_sizes = {1, 8, 64};
      try {
        (void)tpb::plan_memory(in);
      } catch (const tpb::InputError&) {
        // an impossible plan (too little memory at this TP) is an answer; try the next TP
      }
    }
  });
  return 0;
}
