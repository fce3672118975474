// tpbench logits: a model's fp32 logits for given token ids, as safetensors — the numerics
// entry point (compare with HF transformers, or the GPU engine with the CPU reference).
// The CPU engine at TP = 1 runs in this process; otherwise the Launcher starts the rank
// processes with the engine workload in its "logits" mode (GPU ranks placed as a sweep
// places them, suite/launch/placement.h), and rank 0 writes the file.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "reference_engine/config/json_text.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/attention_widths.h"
#include "reference_engine/model/engine.h"
#include "reference_engine/weights/safetensors.h"
#include "reference_engine/weights/weight_source.h"
#include "reference_engine/comm/backends.h"
#include "suite/records/build_info.h"
#include "suite/scenario/case_spec.h"
#include "suite/measure/digest.h"
#include "suite/cli/subcommand.h"
#include "suite/launch/launcher.h"
#include "suite/launch/mps.h"
#include "suite/launch/placement.h"
#include "suite/scenario/sweep.h"
#include "suite/workloads/engine_workload.h"
#include "tpb/check.h"
#include "tpb/message_text.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kUsage =
    "usage: tpbench logits --model DIR|PRESET --input-ids ids.json --out FILE.safetensors\n"
    "                      [--device cpu|cuda] [--tp N] [--prefill K] [--weights synthetic|DIR] [--seed S]\n"
    "                      [--allreduce BACKEND] [--placement exclusive|shared]\n"
    "Writes the float32 tensor `logits` [batch, seq, vocab] of the engine on --device: the fp32 CPU\n"
    "reference engine (cpu, default) or the bf16 GPU engine (cuda), so that HF parity is one command.\n"
    "  --model      an HF folder (config.json [+ *.safetensors]) or a preset in scenarios/models\n"
    "  --input-ids  JSON list of equal-length token-id lists\n"
    "  --prefill K  prefill the first K tokens, then decode the rest one by one (default: all)\n"
    "  --tp N       tensor-parallel rank processes (default 1)\n"
    "  --allreduce  the ranks' backend (default shm on cpu, nccl on cuda)\n"
    "  --placement  cuda: one rank per GPU (exclusive) or ranks packed onto the visible GPUs (shared,\n"
    "               under MPS when it can be had); default exclusive when the GPUs suffice, else shared\n"
    "  --weights    'synthetic', or a checkpoint folder (default: the model folder when it holds\n"
    "               *.safetensors files, else synthetic)\n"
    "  --seed S     synthetic weight seed (default 1234)\n";

// The one rank of a TP = 1 run.
class SelfCommunicator final : public tpb::Communicator {
 public:
  void all_reduce(const void* in, void* out, std::size_t count, tpb::DType dtype, void*) override {
    if (in != out) std::memcpy(out, in, count * tpb::dtype_size(dtype));
  }
  void all_gather(const void* in, void* out, std::size_t count, tpb::DType dtype, void*) override {
    std::memcpy(out, in, count * tpb::dtype_size(dtype));
  }
  void barrier() override {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "self"; }
  std::size_t memory_bytes() const override { return 0; }
};

bool has_safetensors(const fs::path& dir) {
  if (!fs::is_directory(dir)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

const tpb::cli::Grammar kGrammar = {
                                    {{"--model", true},
                                     {"--input-ids", true},
                                     {"--out", true},
                                     {"--device", true},
                                     {"--weights", true},
                                     {"--tp", true},
                                     {"--prefill", true},
                                     {"--seed", true},
                                     {"--allreduce", true},
                                     {"--placement", true}},
                                    0,
                                    ""};

std::int64_t integer_option(const tpb::cli::Args& args, const std::string& flag, std::int64_t fallback) {
  const auto v = args.value(flag);
  if (!v) return fallback;
  try {
    std::size_t n = 0;
    const long long x = std::stoll(*v, &n);
    if (n == v->size()) return x;
  } catch (...) {
  }
  TPB_INPUT_FAIL("logits: " << flag << ": expected an integer, got '" << tpb::cut_for_message(*v) << "'");
}

// Runs the rank processes of `spec` through the Launcher (rank 0 writes the file) and checks
// that every rank computed the same logits. `placement`: GPU ranks' devices, else null.
void run_rank_processes(const tpb::CaseSpec& spec, int tp, const tpb::RankPlacement* placement) {
  std::error_code ec;
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  TPB_CHECK(!ec, "cannot find the tpbench binary (/proc/self/exe): " << ec.message());
  tpb::LauncherOptions lo;
  lo.worker_binary = self;
  lo.log_dir = (fs::temp_directory_path() / ("tpbench-logits-" + std::to_string(::getpid()))).string();
  fs::create_directories(lo.log_dir);
  std::unique_ptr<tpb::MpsSession> mps;
  if (placement != nullptr && placement->device_shared()) {
    // Ranks sharing a GPU run at once under MPS (else they time-slice, still correct).
    tpb::MpsOptions mo;
    mo.log_dir = (fs::path(lo.log_dir) / "mps-log").string();
    mps = std::make_unique<tpb::MpsSession>(mo);
    std::cerr << "logits: " << tp << " ranks on " << placement->gpus_used << " GPU(s), mps: " << mps->status().state
              << (mps->status().detail.empty() ? "" : ": ") << mps->status().detail << "\n";
  }
  tpb::Launcher launcher(lo);
  const tpb::CaseRun run = launcher.run_case("logits", tp, spec.to_json(), spec.measure.timeout_s, placement);
  launcher.shutdown();  // also removes the shared memory its group made
  mps.reset();
  // The rank logs' folder goes whatever happened: a failure's message carries their tails
  // (run.error), and each failed run left a folder in /tmp before.
  fs::remove_all(lo.log_dir, ec);
  TPB_CHECK(run.ok, "logits: the rank processes failed: " << run.error);
  const std::vector<tpb::RankResult> ranks = tpb::rank_results_from_json(run.ranks);
  for (int r = 1; r < tp; ++r)
    TPB_CHECK(ranks[r].digests == ranks[0].digests,
              "logits: rank " << r << " computed other logits than rank 0 (digests differ)");
  // Rank 0 writes the file only when every value is finite (logits_mode_result).
  TPB_CHECK(ranks[0].nonfinite.empty(), "logits: " << ranks[0].nonfinite << "; nothing written");
}

int run_logits(const tpb::cli::Args& args) {
  const std::string model = args.value_or("--model", ""), ids_path = args.value_or("--input-ids", ""),
                    out = args.value_or("--out", ""), device = args.value_or("--device", "cpu");
  std::string weights = args.value_or("--weights", "");
  const int tp = static_cast<int>(integer_option(args, "--tp", 1));
  const std::int64_t prefill = integer_option(args, "--prefill", 0), seed = integer_option(args, "--seed", 1234);
  TPB_INPUT_CHECK(!model.empty() && !ids_path.empty() && !out.empty(),
                  "logits: --model, --input-ids and --out are required (see tpbench logits --help)");
  TPB_INPUT_CHECK(device == "cpu" || device == "cuda", "logits: --device: expected cpu or cuda, got '" << tpb::cut_for_message(device) << "'");
  const bool gpu = device == "cuda";
  TPB_INPUT_CHECK(!gpu || tpb::build_info().have_cuda, "logits: --device cuda: this tpbench was built without CUDA");
  TPB_INPUT_CHECK(tp >= 1, "logits: --tp: expected >= 1, got " << tp);
  TPB_INPUT_CHECK(prefill >= 0, "logits: --prefill: expected >= 0, got " << prefill);
  const std::string backend = args.value_or("--allreduce", gpu ? "nccl" : "shm");
  TPB_INPUT_CHECK(tpb::find_backend(backend) != nullptr && tpb::is_gpu_backend(backend) == gpu,
                  "logits: --allreduce: expected a " << device << " backend ("
                                                     << tpb::backend_list(gpu ? tpb::BackendDevice::gpu : tpb::BackendDevice::host)
                                                     << "), got '" << tpb::cut_for_message(backend) << "'");
  TPB_INPUT_CHECK(gpu || !args.value("--placement"), "logits: --placement: places GPU ranks; --device is cpu");

  const tpb::ModelConfig config = tpb::load_model_config_by_name(model);
  config.validate_tp(tp);
  if (gpu) tpb::check_gpu_attention_widths(config, model);
  // The config file the preset or folder resolved to, for the rank processes.
  std::string config_path = model;
  if (fs::is_directory(model)) config_path = (fs::path(model) / "config.json").string();
  else if (!fs::exists(model)) config_path = (fs::path(tpb::models_dir()) / (model + ".json")).string();
  config_path = fs::absolute(config_path).string();
  if (weights.empty()) weights = has_safetensors(model) ? model : "synthetic";
  if (weights != "synthetic") weights = fs::absolute(weights).string();

  {
    std::ifstream f(ids_path);
    TPB_INPUT_CHECK(f.good(), "logits: cannot read --input-ids " << ids_path);
  }
  const json ids_json = tpb::read_json_text_file(ids_path);  // strict and bounded (json_text.h)
  const auto ids = tpb::read_input_ids(ids_json, ids_path);
  for (std::size_t b = 0; b < ids.size(); ++b)
    for (std::size_t i = 0; i < ids[b].size(); ++i)
      TPB_INPUT_CHECK(ids[b][i] < config.vocab_size, ids_path << ": $[" << b << "][" << i << "]: token id " << ids[b][i]
                                                              << " is outside the vocabulary [0, " << config.vocab_size << ")");

  std::string where = "tp " + std::to_string(tp);
  if (!gpu && tp == 1) {
    SelfCommunicator comm;
    auto source = weights == "synthetic"
                      ? tpb::make_synthetic_weights(static_cast<std::uint64_t>(seed))
                      : tpb::open_safetensors_weights(weights, config.nested_text_config ? "language_model." : "");
    tpb::Engine engine(config, tpb::Shard{0, 1}, comm, *source);
    const auto logits = tpb::engine_logits(engine, ids, prefill);
    // NaN or Inf logits are a failure, never a file and exit 0 (the run workload says the same).
    const std::string nonfinite = tpb::nonfinite_values("logits", logits.data(), logits.size());
    TPB_CHECK(nonfinite.empty(), "logits: " << nonfinite << "; " << out << " not written");
    tpb::write_safetensors_f32(out, {{"logits",
                                      {static_cast<std::int64_t>(ids.size()), static_cast<std::int64_t>(ids[0].size()),
                                       config.vocab_size},
                                      logits.data()}});
  } else {
    tpb::CaseSpec spec;
    spec.case_id = "logits";
    spec.workload = "engine";
    spec.device = device;
    spec.params = {{"mode", "logits"},   {"tp", tp},           {"allreduce", backend},
                   {"input_ids", ids_json}, {"prefill", prefill}, {"out", fs::absolute(out).string()}};
    spec.model = tpb::CaseSpec::Model{config_path, json::object(), weights, static_cast<std::uint64_t>(seed)};
    spec.measure.timeout_s = 600;
    if (!gpu) {
      run_rank_processes(spec, tp, nullptr);
      where += ", " + backend;
    } else {
      // Every rank on a GPU of its own when there are enough, else packed (suite/launch/placement.h).
      const int gpus = tpb::detect_machine().gpu_count;
      TPB_CHECK(gpus > 0, "logits: --device cuda: no GPU is visible");
      const auto placement_flag = args.value("--placement");
      const tpb::Placement kind = placement_flag ? tpb::parse_placement(*placement_flag, "logits: --placement")
                                                 : (tp <= gpus ? tpb::Placement::exclusive : tpb::Placement::shared);
      const tpb::RankPlacement placement = tpb::place_ranks(kind, tp, gpus);
      TPB_CHECK(placement.skip_reason.empty(), "logits: " << placement.skip_reason);
      run_rank_processes(spec, tp, &placement);
      where += ", " + backend + ", " + tpb::placement_name(kind) + " placement on " + std::to_string(placement.gpus_used) +
               " GPU(s)";
    }
  }
  std::cerr << "logits: wrote " << out << " [" << ids.size() << ", " << ids[0].size() << ", " << config.vocab_size
            << "] (" << config.name << ", " << (gpu ? "bf16 GPU engine" : "fp32 CPU engine") << ", " << where
            << ", weights " << weights << ")\n";
  return 0;
}

}  // namespace

TPB_SUBCOMMAND("logits", "Write a model's logits for given token ids as safetensors", kUsage, kGrammar, run_logits);
