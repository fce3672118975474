// tpbench plan: predict per-rank memory and KV-cache capacity for a deployment, with the
// serving engines' start-up formula (reference_engine/memory/planner.h), or apply that
// formula to two free-memory readings taken off a serving log (--from-measured).
//
// Exit status: 0 when the plan is feasible, 1 when it is computed and infeasible (the full
// plan and its one-sentence reason are still printed, so scripts can gate a deployment on
// it), 2 for bad flags or a bad model config.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/config/json_text.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/gpu_catalog.h"
#include "reference_engine/memory/planner.h"
#include "suite/cli/subcommand.h"
#include "tpb/check.h"
#include "tpb/message_text.h"

namespace {

using tpb::kGiB;
using tpb::kMiB;

constexpr const char* kUsageHead =
    "usage: tpbench plan --model PRESET|DIR --tp N [--quant bf16|fp8|int4|f32]\n"
    "                    (--gpu-mem-gib X | --gpu NAME) [--mem-fraction F] [--allreduce BACKEND]\n"
    "                    [--interconnect nvlink|pcie-p2p|pcie-no-p2p] [--custom-on-pcie]\n"
    "                    [--tokens T] [--overrides JSON] [--json] [more options below]\n"
    "       tpbench plan --from-measured --total-gib A --avail-gib B --mem-fraction F\n"
    "                    [--model PRESET|DIR] [--tokens T] [--kv-dtype bf16|fp8] [--json]\n"
    "\n"
    "Predicts, per rank, how a serving engine sizes its KV cache at start-up:\n"
    "  total = device total - CUDA context - communicator buffers   (free before weights)\n"
    "  avail = total - weights per rank                             (free after weights)\n"
    "  rest  = avail - total * (1 - mem_fraction);  max_tokens = floor(rest / kv_cell)\n"
    "and whether the CUDA-graph pool and the activation peak fit in the slack\n"
    "total * (1 - mem_fraction). An infeasible plan says in one sentence why, with the\n"
    "smallest mem_fraction that gives one token and the one that gives --tokens.\n"
    "\n"
    "  --model PRESET|DIR      scenarios/models/<PRESET>.json, an HF config.json or its folder\n"
    "  --tp N                  tensor-parallel size (ranks)\n"
    "  --quant Q               bf16 (default) | fp8 (128x128 block scales on every linear layer\n"
    "                          but embeddings, norms, router, lm_head) | int4 (compressed-tensors\n"
    "                          group-32 on the routed experts only, as Kimi-K2.5 ships)\n"
    "  --gpu NAME              a GPU of the catalog (its total, a CUDA-context estimate and its usual\n"
    "                          interconnect; each figure's source is printed with the plan):\n"
    "                            ";
// kUsageHead + the catalog's names + kUsageTail: the names come from the catalog itself.
constexpr const char* kUsageTail =
    "\n"
    "                          case-insensitive, with aliases: rtx-pro-6000, \"RTX PRO 6000\", h20-3e,\n"
    "                          nvidia-smi's own names (\"NVIDIA H100 80GB HBM3\", ...)\n"
    "  --gpu-mem-gib X         device total in GiB as cudaMemGetInfo reports it (Hopper context estimate)\n"
    "  --mem-fraction F        mem_fraction_static in (0, 1] (default 0.85)\n"
    "  --allreduce BACKEND     auto (default: custom allreduce below its max message, NCCL above, as\n"
    "                          SGLang and vLLM start), nccl, or another backend of `tpbench list`\n"
    "  --interconnect I        nvlink | pcie-p2p | pcie-no-p2p: how the GPUs reach each other (default:\n"
    "                          the --gpu entry's; nvlink with --gpu-mem-gib). The custom allreduce needs\n"
    "                          CUDA IPC peer access: on pcie-no-p2p a custom or auto backend plans NCCL\n"
    "                          only, and the plan says so (allreduce_planned, allreduce_note in --json);\n"
    "                          on pcie-p2p above TP 2 too, as SGLang, vLLM and tpbench keep it off\n"
    "                          on more than two PCIe-only GPUs\n"
    "  --custom-on-pcie        the custom allreduce forced on more than two PCIe-only GPUs (a scenario's\n"
    "                          comm.custom_on_pcie; a deployment running a PCIe IPC allreduce): its\n"
    "                          buffers counted at pcie-p2p at any TP\n"
    "  --tokens T              KV tokens the deployment needs (default: at least one)\n"
    "  --overrides JSON        model config overrides, e.g. '{\"num_hidden_layers\": 3}'\n"
    "  --kv-dtype D            bf16 (default) | fp8: bytes of one KV element\n"
    "  --text-only             leave the vision tower out (tpbench's own engine runs the text model)\n"
    "  --context-mib N         override the CUDA-context estimate\n"
    "  --custom-max-mib N      custom allreduce max message size (default 8)\n"
    "  --nccl-channels N       NCCL channels assumed for its buffers (default 32)\n"
    "  --nccl-over-sockets     NCCL reaches its peers over its socket transport, as ranks sharing\n"
    "                          a GPU do (shared placement): 368 MiB + 14 MiB x TP of buffers per\n"
    "                          rank, measured on an H200 at TP 2 and 4 (--nccl-channels then unused)\n"
    "  --graph-batch-sizes L   captured decode batch sizes, comma-separated (default\n"
    "                          1,2,4,8,16,32,64,128,256; 'none' for no graphs)\n"
    "  --batch B --seq-len S   the largest eager forward for the activation peak (default 1 x 8192,\n"
    "                          a typical chunked-prefill size)\n"
    "  --sweep-fractions L     also plan each fraction in L (comma-separated) for each backend of\n"
    "                          --sweep-backends (default nccl,auto): KV tokens vs fraction, and\n"
    "                          what the custom allreduce's buffers cost in tokens\n"
    "  --json                  one JSON object: weights_bytes_per_rank, comm_bytes_per_rank,\n"
    "                          kv_cell_bytes, total_gib, avail_gib, rest_gib, max_tokens, feasible,\n"
    "                          min_mem_fraction, interconnect, allreduce_planned, breakdown, and more\n"
    "\n"
    "--from-measured applies the formula to two readings off a serving log: --total-gib (free\n"
    "before weights) and --avail-gib (free after weights, e.g. SGLang's \"avail mem=... GB\");\n"
    "with --model it also gives KV tokens.\n"
    "\n"
    "Every size is per rank, in GiB (2^30 B) with GB (10^9 B) in parentheses where a datasheet's\n"
    "GB may be compared, and exact bytes in the table.\n"
    "\n"
    "Exit status: 0 feasible, 1 computed but infeasible (the plan is still printed), 2 bad input.\n";

// The full usage text, built once (the registrar below reads it during static initialisation;
// gpu_catalog() is a function-local static, so it is ready whenever it is asked).
const char* usage_text() {
  static const std::string text = std::string(kUsageHead) + tpb::gpu_names() + kUsageTail;
  return text.c_str();
}

// Every option takes a value but the four switches; none is repeatable.
const tpb::cli::Grammar& grammar() {
  static const tpb::cli::Grammar g = [] {
    tpb::cli::Grammar out{{}, 0, ""};
    for (const char* valued : {"--model", "--tp", "--quant", "--gpu-mem-gib", "--gpu", "--mem-fraction", "--allreduce",
                               "--interconnect", "--tokens", "--overrides", "--kv-dtype", "--context-mib",
                               "--custom-max-mib", "--nccl-channels", "--graph-batch-sizes", "--batch", "--seq-len",
                               "--total-gib", "--avail-gib", "--sweep-fractions", "--sweep-backends"})
      out.options.push_back({valued, true});
    for (const char* flag : {"--json", "--from-measured", "--text-only", "--nccl-over-sockets", "--custom-on-pcie"})
      out.options.push_back({flag});
    return out;
  }();
  return g;
}

using tpb::cli::Args;

double to_double(const std::string& flag, const std::string& s) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TPB_INPUT_CHECK(used == s.size() && !s.empty() && std::isfinite(v), "plan: " << flag << ": expected a number, got '" << tpb::cut_for_message(s) << "'");
  return v;
}

std::int64_t to_int(const std::string& flag, const std::string& s, std::int64_t min) {
  return tpb::cli::integer_value("plan", flag, s, min);
}

std::int64_t kv_dtype_bytes(const Args& a) {
  const std::string d = a.value("--kv-dtype").value_or("bf16");
  TPB_INPUT_CHECK(d == "bf16" || d == "fp8", "plan: --kv-dtype: expected bf16 or fp8, got '" << tpb::cut_for_message(d) << "'");
  return d == "fp8" ? 1 : 2;
}

double mem_fraction(const Args& a, bool required) {
  auto v = a.value("--mem-fraction");
  TPB_INPUT_CHECK(v || !required, "plan: --from-measured needs --mem-fraction");
  const double f = v ? to_double("--mem-fraction", *v) : 0.85;
  TPB_INPUT_CHECK(f > 0.0 && f <= 1.0, "plan: --mem-fraction: expected a value in (0, 1], got " << f);
  return f;
}

tpb::ModelConfig load_model(const Args& a) {
  auto model = a.value("--model");
  TPB_INPUT_CHECK(model, "plan: --model PRESET|DIR is required");
  tpb::ModelConfig c = tpb::load_model_config_by_name(*model);
  if (auto o = a.value("--overrides")) {
    // Strict, as a file is read (json_text.h): duplicate keys, 1e400 and the like are refused.
    const tpb::JsonText j = tpb::parse_json_text(*o);
    TPB_INPUT_CHECK(j.problem.empty(), "plan: --overrides: not valid JSON: " << j.problem
                                           << (j.byte > 0 ? " (at character " + std::to_string(j.byte) + ")" : std::string()));
    tpb::apply_overrides(c, j.value, "--overrides", "$");
  }
  return c;
}

double to_gib(double bytes) { return bytes / static_cast<double>(kGiB); }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// ---- --from-measured ------------------------------------------------------------------

int run_from_measured(const Args& a) {
  for (const char* f : {"--tp", "--quant", "--gpu", "--gpu-mem-gib", "--allreduce", "--interconnect",
                        "--context-mib", "--custom-max-mib", "--nccl-channels", "--graph-batch-sizes", "--batch",
                        "--seq-len"})
    TPB_INPUT_CHECK(!a.value(f), "plan: " << f << " does not apply to --from-measured (it reads total and avail off a log)");
  for (const char* f : {"--nccl-over-sockets", "--custom-on-pcie"})
    TPB_INPUT_CHECK(!a.has(f), "plan: " << f << " does not apply to --from-measured (it reads total and avail off a log)");
  auto total_s = a.value("--total-gib"), avail_s = a.value("--avail-gib");
  TPB_INPUT_CHECK(total_s && avail_s, "plan: --from-measured needs --total-gib and --avail-gib");
  const double total_gib = to_double("--total-gib", *total_s), avail_gib = to_double("--avail-gib", *avail_s);
  TPB_INPUT_CHECK(total_gib > 0, "plan: --total-gib: expected > 0, got " << total_gib);
  TPB_INPUT_CHECK(avail_gib >= 0 && avail_gib <= total_gib,
                  "plan: --avail-gib: expected 0.." << total_gib << " (free after weights <= free before), got " << avail_gib);
  const double f = mem_fraction(a, true);
  const std::int64_t tokens = a.value("--tokens") ? to_int("--tokens", *a.value("--tokens"), 0) : 0;
  const double total = total_gib * kGiB, avail = avail_gib * kGiB;
  const double rest = tpb::kv_rest_bytes(total, avail, f);

  nlohmann::json j;
  j["mode"] = "from-measured";
  j["total_gib"] = total_gib;
  j["avail_gib"] = avail_gib;
  j["mem_fraction"] = f;
  j["rest_gib"] = to_gib(rest);
  // Without a model there is no cell: feasible means rest > 0, and the smallest fraction
  // solves rest = 0.
  bool feasible = rest > 0;
  double min_fraction = 1.0 - avail / total;
  std::string verdict;
  if (a.value("--model")) {
    const tpb::ModelConfig c = load_model(a);
    const std::int64_t cell = tpb::kv_cell_bytes(c, kv_dtype_bytes(a));
    const std::int64_t max_tokens = tpb::kv_max_tokens(total, avail, f, cell);
    feasible = max_tokens >= std::max<std::int64_t>(1, tokens);
    min_fraction = tpb::kv_min_mem_fraction(total, avail, cell, 1);
    j["model"] = c.name;
    j["kv_cell_bytes"] = cell;
    j["max_tokens"] = max_tokens;
    j["requested_tokens"] = tokens;
    if (tokens > 0) j["min_mem_fraction_requested"] = tpb::kv_min_mem_fraction(total, avail, cell, tokens);
    verdict = tpb::kv_verdict(total, avail, f, cell, tokens);
  } else {
    TPB_INPUT_CHECK(tokens == 0, "plan: --tokens needs --model (the KV cell size comes from the config)");
    std::ostringstream os;
    if (feasible)
      os << "rest " << fmt("%.2f", to_gib(rest)) << " GiB > 0: the server starts (give --model for KV tokens); "
         << "mem_fraction > " << fmt("%.4f", min_fraction) << " keeps rest positive.";
    else
      os << "Not enough memory: rest " << fmt("%.2f", to_gib(rest)) << " GiB <= 0; mem_fraction > "
         << fmt("%.4f", min_fraction) << " makes rest positive.";
    verdict = os.str();
  }
  j["feasible"] = feasible;
  j["min_mem_fraction"] = min_fraction;
  j["verdict"] = verdict;

  if (a.has("--json")) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("tpbench plan --from-measured\n");
    std::printf("  total (free before weights)  %10.2f GiB\n", total_gib);
    std::printf("  avail (free after weights)   %10.2f GiB\n", avail_gib);
    std::printf("  slack total*(1-%.4g)       %10.2f GiB\n", f, total_gib * (1 - f));
    std::printf("  rest                         %10.2f GiB\n", to_gib(rest));
    if (j.contains("max_tokens")) {
      std::printf("  kv cell                      %10lld B\n", static_cast<long long>(j["kv_cell_bytes"].get<std::int64_t>()));
      std::printf("  max tokens                   %10lld\n", static_cast<long long>(j["max_tokens"].get<std::int64_t>()));
    }
    std::printf("%s\n", verdict.c_str());
  }
  return feasible ? 0 : 1;
}

// ---- predicted plan ---------------------------------------------------------------------

std::vector<std::int64_t> graph_batch_sizes(const Args& a) {
  const std::string s = a.value("--graph-batch-sizes").value_or("1,2,4,8,16,32,64,128,256");
  std::vector<std::int64_t> out;
  if (s == "none") return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(to_int("--graph-batch-sizes", item, 1));
  TPB_INPUT_CHECK(!out.empty(), "plan: --graph-batch-sizes: expected a comma-separated list or 'none'");
  return out;
}

// Where the device figures of a plan come from, for the text and the JSON.
struct DeviceSource {
  const tpb::GpuSpec* spec = nullptr;  // the --gpu catalog entry; null with --gpu-mem-gib
  std::string name;                    // the catalog name, or "95.00 GiB GPU" for --gpu-mem-gib
  std::string context_source;          // where the CUDA-context figure comes from
  std::string interconnect_source;     // where the interconnect comes from: the catalog, the flag, the default
  std::string interconnect_note;       // the catalog's reason for its default; empty when not from the catalog
};

// "95.00 GiB (102.00 GB)": binary units first, the decimal GB of datasheets and `du -H` after.
std::string gib_gb(double bytes) {
  return fmt("%.2f GiB", to_gib(bytes)) + fmt(" (%.2f GB)", bytes / 1e9);
}

nlohmann::json plan_json(const tpb::MemoryPlan& p, const DeviceSource& dev) {
  const auto& in = p.input;
  nlohmann::json j;
  j["mode"] = "predicted";
  j["model"] = in.config.name;
  j["tp"] = in.tp;
  j["quant"] = tpb::quantization_name(in.quant);
  j["gpu"] = dev.name;
  if (dev.spec) {
    const tpb::GpuSpec& g = *dev.spec;
    j["gpu_spec"] = {{"name", g.name},
                     {"product", g.product},
                     {"aliases", g.aliases},
                     {"family", g.family},
                     {"datasheet_gb", g.datasheet_gb},
                     {"datasheet", g.datasheet},
                     {"smi_total_mib", g.smi_total_mib},
                     {"smi_source", g.smi_source},
                     {"reserved_mib", g.reserved_mib},
                     {"total_bytes", g.total_bytes},
                     {"cuda_context_bytes", g.cuda_context_bytes},
                     {"measured", g.measured},
                     {"interconnect", tpb::interconnect_name(g.interconnect)},
                     {"interconnect_note", g.interconnect_note}};
  } else {
    j["gpu_spec"] = nullptr;
  }
  j["cuda_context_source"] = dev.context_source;
  j["mem_fraction"] = in.mem_fraction;
  j["interconnect"] = tpb::interconnect_name(in.interconnect);
  j["interconnect_source"] = dev.interconnect_source;
  j["custom_on_pcie"] = in.custom_on_pcie;
  j["custom_allreduce_can_run"] = tpb::custom_allreduce_blocker(in.interconnect, in.tp, in.custom_on_pcie).empty();
  j["allreduce"] = in.allreduce;
  j["allreduce_planned"] = p.allreduce_planned;
  j["allreduce_note"] = p.allreduce_note;
  j["custom_max_bytes"] = in.custom_max_bytes;
  j["nccl_over_sockets"] = in.nccl_over_sockets;
  j["requested_tokens"] = in.requested_tokens;
  j["gpu_total_bytes"] = p.gpu_total_bytes;
  j["cuda_context_bytes"] = p.cuda_context_bytes;
  j["weights_bytes_per_rank"] = p.weights.bytes_per_rank;
  j["weights_bytes_global"] = p.weights.bytes_global;
  j["parameters_global"] = p.weights.elements_global;
  j["comm_bytes_per_rank"] = p.comm.total();
  j["comm_custom_bytes_per_rank"] = p.comm.custom_bytes;
  j["comm_nccl_bytes_per_rank"] = p.comm.nccl_bytes;
  j["kv_cell_bytes"] = p.kv_cell_bytes;
  j["total_bytes"] = p.total_bytes;
  j["avail_bytes"] = p.avail_bytes;
  j["total_gib"] = to_gib(static_cast<double>(p.total_bytes));
  j["avail_gib"] = to_gib(static_cast<double>(p.avail_bytes));
  j["slack_gib"] = to_gib(p.slack_bytes);
  j["rest_gib"] = to_gib(p.rest_bytes);
  j["max_tokens"] = p.max_tokens;
  j["kv_cache_bytes_per_rank"] = p.kv_cache_bytes;
  j["feasible"] = p.feasible;
  j["min_mem_fraction"] = p.min_mem_fraction;
  if (in.requested_tokens > 0) j["min_mem_fraction_requested"] = p.min_mem_fraction_requested;
  j["graph_pool_bytes"] = p.graph_pool_bytes;
  nlohmann::json pools = nlohmann::json::array();
  for (const auto& g : p.graph_pools) pools.push_back({{"batch_size", g.batch_size}, {"bytes", g.bytes}});
  j["graph_pools"] = pools;
  j["activation_peak"] = {{"batch", in.activation_batch},          {"seq_len", in.activation_seq_len},
                          {"tokens", p.activation.tokens},         {"residual_bytes", p.activation.residual_bytes},
                          {"attention_bytes", p.activation.attention_bytes}, {"moe_bytes", p.activation.moe_bytes},
                          {"dense_mlp_bytes", p.activation.dense_mlp_bytes}, {"logits_bytes", p.activation.logits_bytes},
                          {"peak_bytes", p.activation.peak_bytes}, {"largest", p.activation.largest}};
  j["slack_needed_bytes"] = p.slack_needed_bytes;
  j["slack_fits"] = p.slack_fits;
  j["max_mem_fraction_for_slack"] = p.max_mem_fraction_for_slack;
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& g : p.weights.groups)
    groups[g.group] = {{"bytes_per_rank", g.bytes_per_rank}, {"bytes_global", g.bytes_global}, {"formats", g.formats}};
  j["weights_by_group"] = groups;
  nlohmann::json breakdown = nlohmann::json::array();
  for (const auto& t : p.breakdown)
    breakdown.push_back({{"term", t.name}, {"bytes_per_rank", t.bytes}, {"sign", std::string(1, t.sign)}, {"note", t.note}});
  j["breakdown"] = breakdown;
  j["assumptions"] = p.assumptions;
  j["verdict"] = p.verdict;
  return j;
}

void print_plan(const tpb::MemoryPlan& p, const DeviceSource& dev) {
  const auto& in = p.input;
  const double total = static_cast<double>(p.gpu_total_bytes), context = static_cast<double>(p.cuda_context_bytes);
  std::printf("tpbench plan: %s, TP %d, %s weights, mem_fraction %.4g\n", in.config.name.c_str(), in.tp,
              tpb::quantization_name(in.quant), in.mem_fraction);
  if (dev.spec) {
    const tpb::GpuSpec& g = *dev.spec;
    std::printf("gpu           %s = %s\n", g.name.c_str(), g.product.c_str());
    std::printf("              total %s per device = nvidia-smi %lld MiB - %lld MiB driver reserve (%s)\n",
                gib_gb(total).c_str(), static_cast<long long>(g.smi_total_mib), static_cast<long long>(g.reserved_mib),
                g.measured ? "measured" : "reserve measured on H200, assumed here");
    std::printf("              nvidia-smi figure: %s\n", g.smi_source.c_str());
    std::printf("              datasheet %lld GB: %s\n", static_cast<long long>(g.datasheet_gb), g.datasheet.c_str());
  } else {
    std::printf("gpu           %s per device, as given (--gpu-mem-gib)\n", gib_gb(total).c_str());
  }
  std::printf("              cuda context %s: %s\n", gib_gb(context).c_str(), dev.context_source.c_str());
  std::printf("interconnect  %s (%s)%s%s\n", tpb::interconnect_name(in.interconnect), dev.interconnect_source.c_str(),
              dev.interconnect_note.empty() ? "" : ": ", dev.interconnect_note.c_str());
  if (p.allreduce_note.empty()) {
    std::printf("allreduce     %s: %s\n", in.allreduce.c_str(),
                p.comm.custom_bytes > 0 ? "custom allreduce and NCCL buffers counted"
                : p.comm.nccl_bytes > 0 ? "NCCL buffers counted"
                                        : "no device buffers");
  } else {
    std::printf("allreduce     %s asked, %s planned. %s\n", in.allreduce.c_str(), p.allreduce_planned.c_str(),
                p.allreduce_note.c_str());
  }
  std::printf("weights       %s unsharded, %s per rank (%s; %.2f billion parameters)\n",
              gib_gb(static_cast<double>(p.weights.bytes_global)).c_str(),
              gib_gb(static_cast<double>(p.weights.bytes_per_rank)).c_str(), tpb::quantization_name(in.quant),
              static_cast<double>(p.weights.elements_global) / 1e9);
  std::printf("\nper rank                          %12s %16s  note\n", "GiB", "bytes");
  for (const auto& t : p.breakdown) {
    const char sign = t.sign == '=' ? '=' : t.sign == '-' ? '-' : ' ';
    std::printf("%c %-31s %12.3f %16lld  %s\n", sign, t.name.c_str(), to_gib(static_cast<double>(t.bytes)),
                static_cast<long long>(t.bytes), t.note.c_str());
  }
  std::printf("\nkv cell            %lld B per token (every rank)\n", static_cast<long long>(p.kv_cell_bytes));
  std::printf("rest               %.3f GiB\n", to_gib(p.rest_bytes));
  std::printf("max tokens         %lld\n", static_cast<long long>(p.max_tokens));
  std::printf("min mem_fraction   %.4f (one token)", std::ceil(p.min_mem_fraction * 1e4 - 1e-9) / 1e4);
  if (in.requested_tokens > 0)
    std::printf(", %.4f (%lld tokens)", std::ceil(p.min_mem_fraction_requested * 1e4 - 1e-9) / 1e4,
                static_cast<long long>(in.requested_tokens));
  std::printf("\nslack              %.3f GiB for graph pool %.3f + activations %.3f GiB: %s\n", to_gib(p.slack_bytes),
              to_gib(static_cast<double>(p.graph_pool_bytes)), to_gib(static_cast<double>(p.activation.peak_bytes)),
              p.slack_fits ? "fits" : "DOES NOT FIT");
  std::printf("feasible           %s\n", p.feasible ? "yes" : "NO");
  std::printf("\nassumptions:\n");
  for (const auto& s : p.assumptions) std::printf("  - %s\n", s.c_str());
  std::printf("\n%s\n", p.verdict.c_str());
}

int run_plan(const Args& a) {
  if (a.has("--from-measured")) return run_from_measured(a);
  for (const char* f : {"--total-gib", "--avail-gib"})
    TPB_INPUT_CHECK(!a.value(f), "plan: " << f << " applies only with --from-measured");

  tpb::PlanInput in;
  in.config = load_model(a);
  auto tp = a.value("--tp");
  TPB_INPUT_CHECK(tp, "plan: --tp N is required");
  in.tp = static_cast<int>(to_int("--tp", *tp, 1));
  in.quant = tpb::parse_quantization(a.value("--quant").value_or("bf16"), "plan: --quant");
  auto gpu = a.value("--gpu");
  auto gpu_gib = a.value("--gpu-mem-gib");
  TPB_INPUT_CHECK(gpu.has_value() != gpu_gib.has_value(), "plan: give exactly one of --gpu NAME or --gpu-mem-gib X");
  DeviceSource dev;
  if (gpu) {
    const tpb::GpuSpec& g = tpb::find_gpu(*gpu);
    dev.spec = &g;
    dev.name = g.name;
    in.gpu_total_bytes = g.total_bytes;
    in.cuda_context_bytes = g.cuda_context_bytes;
    in.interconnect = g.interconnect;
    dev.context_source = g.measured ? "MEASURED on this board (context + libraries, gpu_catalog.h)"
                                    : "ESTIMATE for the " + g.family + " family (gpu_catalog.h)";
    dev.interconnect_source = "catalog default for " + g.name + "; --interconnect to change";
    dev.interconnect_note = g.interconnect_note;
  } else {
    const double x = to_double("--gpu-mem-gib", *gpu_gib);
    TPB_INPUT_CHECK(x > 0, "plan: --gpu-mem-gib: expected > 0, got " << x);
    in.gpu_total_bytes = static_cast<std::int64_t>(std::llround(x * kGiB));
    in.cuda_context_bytes = tpb::default_cuda_context_bytes();
    dev.name = fmt("%.2f GiB GPU", x);
    dev.context_source = "the Hopper figure, measured on H200 (gpu_catalog.h); --context-mib to change";
    dev.interconnect_source = "default without --gpu; --interconnect to change";
  }
  if (auto c = a.value("--context-mib")) {
    in.cuda_context_bytes = to_int("--context-mib", *c, 0) * kMiB;
    dev.context_source = "as given (--context-mib)";
  }
  if (auto i = a.value("--interconnect")) {
    in.interconnect = tpb::parse_interconnect(*i, "plan: --interconnect");
    dev.interconnect_source = "as given, --interconnect";
    dev.interconnect_note.clear();
  }
  in.custom_on_pcie = a.has("--custom-on-pcie");
  in.mem_fraction = mem_fraction(a, false);
  // Serving engines start with their custom allreduce on (SGLang's and vLLM's default), so the
  // plan counts its buffers unless told otherwise: the incident of issue 18 was a plan without them.
  in.allreduce = a.value("--allreduce").value_or("auto");
  tpb::comm_bytes(in.allreduce, 2, in.custom_max_bytes, in.nccl_channels, "plan: --allreduce");  // names the flag
  if (auto t = a.value("--tokens")) in.requested_tokens = to_int("--tokens", *t, 0);
  in.kv_dtype_bytes = kv_dtype_bytes(a);
  if (auto m = a.value("--custom-max-mib")) in.custom_max_bytes = to_int("--custom-max-mib", *m, 1) * kMiB;
  if (auto n = a.value("--nccl-channels")) in.nccl_channels = static_cast<int>(to_int("--nccl-channels", *n, 1));
  in.nccl_over_sockets = a.has("--nccl-over-sockets");
  in.graph_batch_sizes = graph_batch_sizes(a);
  if (auto b = a.value("--batch")) in.activation_batch = to_int("--batch", *b, 1);
  if (auto s = a.value("--seq-len")) in.activation_seq_len = to_int("--seq-len", *s, 1);
  in.include_vision_tower = !a.has("--text-only");

  const tpb::MemoryPlan p = tpb::plan_memory(in);
  std::vector<tpb::FractionSweepPoint> sweep;
  if (auto list = a.value("--sweep-fractions")) {
    std::vector<double> fractions;
    std::stringstream ss(*list);
    for (std::string item; std::getline(ss, item, ',');) {
      const double f = to_double("--sweep-fractions", item);
      TPB_INPUT_CHECK(f > 0.0 && f <= 1.0, "plan: --sweep-fractions: expected values in (0, 1], got " << f);
      fractions.push_back(f);
    }
    TPB_INPUT_CHECK(!fractions.empty(), "plan: --sweep-fractions: expected a comma-separated list");
    std::vector<std::string> backends;
    std::stringstream bs(a.value("--sweep-backends").value_or("nccl,auto"));
    for (std::string item; std::getline(bs, item, ',');) {
      tpb::comm_bytes(item, 2, in.custom_max_bytes, in.nccl_channels, "plan: --sweep-backends");
      backends.push_back(item);
    }
    sweep = tpb::sweep_mem_fraction(in, backends, fractions);
  } else {
    TPB_INPUT_CHECK(!a.value("--sweep-backends"), "plan: --sweep-backends needs --sweep-fractions");
  }
  if (a.has("--json")) {
    nlohmann::json j = plan_json(p, dev);
    if (!sweep.empty()) {
      nlohmann::json points = nlohmann::json::array();
      for (const auto& s : sweep)
        points.push_back({{"allreduce", s.allreduce}, {"mem_fraction", s.mem_fraction}, {"comm_bytes_per_rank", s.comm_bytes},
                          {"max_tokens", s.max_tokens}, {"feasible", s.feasible}, {"slack_fits", s.slack_fits}});
      j["fraction_sweep"] = points;
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_plan(p, dev);
    if (!sweep.empty()) {
      std::printf("\nKV tokens per rank vs mem_fraction (* = slack too small for graphs + activations)\n");
      std::printf("%-16s %10s %14s %12s\n", "allreduce", "fraction", "comm MiB", "max tokens");
      for (const auto& s : sweep)
        std::printf("%-16s %10.4g %14.1f %12lld%s\n", s.allreduce.c_str(), s.mem_fraction,
                    static_cast<double>(s.comm_bytes) / kMiB, static_cast<long long>(s.max_tokens),
                    s.slack_fits ? "" : " *");
    }
  }
  return p.feasible ? 0 : 1;
}

}  // namespace

TPB_SUBCOMMAND("plan", "Predict per-rank memory and KV-cache capacity for a deployment", usage_text(), grammar(), run_plan);
