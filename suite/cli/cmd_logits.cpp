// tpbench logits: a model's fp32 logits for given token ids, as safetensors — the numerics
// entry point (compare with HF transformers, or a GPU engine with the CPU reference).
// TP = 1 runs in this process; TP > 1 launches the rank processes through the Launcher
// with the engine workload in its "logits" mode, and rank 0 writes the file.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "reference_engine/config/model_config.h"
#include "reference_engine/model/engine.h"
#include "reference_engine/weights/safetensors.h"
#include "reference_engine/weights/weight_source.h"
#include "suite/case_spec.h"
#include "suite/cli/subcommand.h"
#include "suite/launcher.h"
#include "suite/workloads/engine_workload.h"
#include "tpb/check.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kUsage =
    "usage: tpbench logits --model DIR|PRESET --input-ids ids.json --out FILE.safetensors\n"
    "                      [--tp N] [--device cpu] [--prefill K] [--weights synthetic|DIR] [--seed S]\n"
    "Writes the float32 tensor `logits` [batch, seq, vocab] of the fp32 CPU reference engine.\n"
    "  --model      an HF folder (config.json [+ *.safetensors]) or a preset in scenarios/models\n"
    "  --input-ids  JSON list of equal-length token-id lists\n"
    "  --prefill K  prefill the first K tokens, then decode the rest one by one (default: all)\n"
    "  --tp N       tensor-parallel rank processes over the shm communicator (default 1)\n"
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

const tpb::cli::Grammar kGrammar = {"logits",
                                    {{"--model", true},
                                     {"--input-ids", true},
                                     {"--out", true},
                                     {"--device", true},
                                     {"--weights", true},
                                     {"--tp", true},
                                     {"--prefill", true},
                                     {"--seed", true}},
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
  TPB_INPUT_FAIL("logits: " << flag << ": expected an integer, got '" << *v << "'");
}

int run_logits(const tpb::cli::Args& args) {
  const std::string model = args.value_or("--model", ""), ids_path = args.value_or("--input-ids", ""),
                    out = args.value_or("--out", ""), device = args.value_or("--device", "cpu");
  std::string weights = args.value_or("--weights", "");
  const int tp = static_cast<int>(integer_option(args, "--tp", 1));
  const std::int64_t prefill = integer_option(args, "--prefill", 0), seed = integer_option(args, "--seed", 1234);
  TPB_INPUT_CHECK(!model.empty() && !ids_path.empty() && !out.empty(),
                  "logits: --model, --input-ids and --out are required (see tpbench logits --help)");
  TPB_INPUT_CHECK(device == "cpu", "logits: --device " << device << ": only the CPU reference engine exists in this build");
  TPB_INPUT_CHECK(tp >= 1, "logits: --tp: expected >= 1, got " << tp);
  TPB_INPUT_CHECK(prefill >= 0, "logits: --prefill: expected >= 0, got " << prefill);

  const tpb::ModelConfig config = tpb::load_model_config_by_name(model);
  config.validate_tp(tp);
  // The config file the preset or folder resolved to, for the rank processes.
  std::string config_path = model;
  if (fs::is_directory(model)) config_path = (fs::path(model) / "config.json").string();
  else if (!fs::exists(model)) config_path = (fs::path(tpb::models_dir()) / (model + ".json")).string();
  config_path = fs::absolute(config_path).string();
  if (weights.empty()) weights = has_safetensors(model) ? model : "synthetic";
  if (weights != "synthetic") weights = fs::absolute(weights).string();

  json ids_json;
  {
    std::ifstream f(ids_path);
    TPB_INPUT_CHECK(f.good(), "logits: cannot read --input-ids " << ids_path);
    try {
      ids_json = json::parse(f);
    } catch (const std::exception& e) {
      TPB_INPUT_FAIL(ids_path << ": not valid JSON: " << e.what());
    }
  }
  const auto ids = tpb::read_input_ids(ids_json, ids_path);
  for (std::size_t b = 0; b < ids.size(); ++b)
    for (std::size_t i = 0; i < ids[b].size(); ++i)
      TPB_INPUT_CHECK(ids[b][i] < config.vocab_size, ids_path << ": $[" << b << "][" << i << "]: token id " << ids[b][i]
                                                              << " is outside the vocabulary [0, " << config.vocab_size << ")");

  if (tp == 1) {
    SelfCommunicator comm;
    auto source = weights == "synthetic"
                      ? tpb::make_synthetic_weights(static_cast<std::uint64_t>(seed))
                      : tpb::open_safetensors_weights(weights, config.nested_text_config ? "language_model." : "");
    tpb::Engine engine(config, tpb::Shard{0, 1}, comm, *source);
    const auto logits = tpb::engine_logits(engine, ids, prefill);
    tpb::write_safetensors_f32(out, {{"logits",
                                      {static_cast<std::int64_t>(ids.size()), static_cast<std::int64_t>(ids[0].size()),
                                       config.vocab_size},
                                      logits.data()}});
  } else {
    std::error_code ec;
    const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
    TPB_CHECK(!ec, "cannot find the tpbench binary (/proc/self/exe): " << ec.message());
    tpb::LauncherOptions lo;
    lo.worker_binary = self;
    lo.log_dir = (fs::temp_directory_path() / ("tpbench-logits-" + std::to_string(::getpid()))).string();
    fs::create_directories(lo.log_dir);
    tpb::CaseSpec spec;
    spec.case_id = "logits";
    spec.workload = "engine";
    spec.device = "cpu";
    spec.params = {{"mode", "logits"},   {"tp", tp},           {"allreduce", "shm"},
                   {"input_ids", ids_json}, {"prefill", prefill}, {"out", fs::absolute(out).string()}};
    spec.model = tpb::CaseSpec::Model{config_path, json::object(), weights, static_cast<std::uint64_t>(seed)};
    spec.measure.timeout_s = 600;
    tpb::Launcher launcher(lo);
    const tpb::CaseRun run = launcher.run_case("logits", tp, spec.to_json(), spec.measure.timeout_s);
    launcher.shutdown();  // also removes the shared memory its group made
    // The rank logs' folder goes whatever happened: a failure's message carries their tails
    // (run.error), and each failed run left a folder in /tmp before.
    if (!run.ok) fs::remove_all(lo.log_dir, ec);
    TPB_CHECK(run.ok, "logits: the rank processes failed: " << run.error);
    const std::vector<tpb::RankResult> ranks = tpb::rank_results_from_json(run.ranks);
    for (int r = 1; r < tp; ++r)
      TPB_CHECK(ranks[r].digests == ranks[0].digests,
                "logits: rank " << r << " computed other logits than rank 0 (digests differ)");
    fs::remove_all(lo.log_dir, ec);
  }
  std::cerr << "logits: wrote " << out << " [" << ids.size() << ", " << ids[0].size() << ", " << config.vocab_size
            << "] (" << config.name << ", tp " << tp << ", weights " << weights << ")\n";
  return 0;
}

}  // namespace

TPB_SUBCOMMAND("logits", "Write a model's logits for given token ids as safetensors", kUsage, kGrammar, run_logits);
