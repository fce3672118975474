// tpbench allreduce: an nccl-tests-style one-off sweep from the command line (-b -e -f -g),
// without a scenario file. It writes the scenario it builds into the results root (so every
// record's `reproduce` command names a real file), runs it as `tpbench run` does (records,
// checks, run.json), and prints nccl-tests' columns and its closing "Avg bus bandwidth" line
// from the records.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/cli/subcommand.h"
#include "suite/records/results.h"
#include "suite/scenario/sweep.h"
#include "tpb/check.h"
#include "tpb/message_text.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: tpbench allreduce [-b MIN] [-e MAX] [-f FACTOR] [-g TP] [--backend B[,B...]]\n"
    "                         [--dtype bf16|f16|f32] [-n ITERS] [-w WARMUP] [--results-dir ROOT]\n"
    "An nccl-tests-style allreduce sweep from the command line: message sizes MIN, MIN x FACTOR,\n"
    "... up to MAX bytes (suffixes K, M, G: powers of 1024), TP ranks, each backend. It writes\n"
    "the scenario it builds into ROOT, runs it as `tpbench run` does (records, the bitwise check\n"
    "against the serial sum, run.json, no report) and prints nccl-tests' columns: size, count,\n"
    "type, redop, time (mean, us), algbw, busbw (GB/s, from the mean), #wrong (0 when every\n"
    "rank's output equals the serial rank-order sum bitwise), then the average bus bandwidth.\n"
    "  -b MIN          smallest message (default 1K)\n"
    "  -e MAX          largest message (default 1M)\n"
    "  -f FACTOR       size multiplier between steps, an integer >= 2 (default 2)\n"
    "  -g TP           ranks (default 2)\n"
    "  --backend B     backends, comma-separated (default nccl with a GPU, else shm)\n"
    "  --dtype D       bf16, f16 or f32 (default f32, as nccl-tests' default float)\n"
    "  -n ITERS        timed iterations per size (default 20)\n"
    "  -w WARMUP       warm-up iterations per size (default 5)\n"
    "  --results-dir ROOT  where the scenario and the run go (default ./results)\n"
    "Exit status as `tpbench run`: 0 every size ran and matched, 1 a case or check failed,\n"
    "2 bad input, 3 nothing ran.\n";

const tpb::cli::Grammar kGrammar = {{{"-b", true}, {"-e", true}, {"-f", true}, {"-g", true}, {"--backend", true},
                                     {"--dtype", true}, {"-n", true}, {"-w", true}, {"--results-dir", true}},
                                    0,
                                    ""};

// "64", "8K", "128M", "1G": bytes, the suffix a power of 1024 as nccl-tests reads it.
std::int64_t parse_size(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  const std::string suffix = text.substr(used);
  const std::int64_t scale = suffix.empty() ? 1 : suffix == "K" || suffix == "k" ? 1LL << 10
                             : suffix == "M" || suffix == "m"                   ? 1LL << 20
                             : suffix == "G" || suffix == "g"                   ? 1LL << 30
                                                                                : 0;
  TPB_INPUT_CHECK(n > 0 && scale > 0 && n <= (1LL << 40) / scale,
                  "allreduce: " << option << ": expected a size in bytes such as 64, 8K, 128M or 1G, got '"
                                << tpb::cut_for_message(text) << "'");
  return n * scale;
}

int parse_int(const std::string& option, const std::string& text, int min) {
  const std::int64_t v = tpb::cli::integer_value("allreduce", option, text, min);
  TPB_INPUT_CHECK(v <= 1 << 20, "allreduce: " << option << ": expected at most " << (1 << 20) << ", got " << v);
  return static_cast<int>(v);
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1)
    out.push_back(text.substr(start, comma - start));
  out.push_back(text.substr(start));
  return out;
}

// The run folder under `root` whose run.json ran `scenario_path` (the newest, if several).
std::string run_dir_of(const std::string& root, const std::string& scenario_path) {
  std::string best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const fs::path run_json = e.path() / "run.json";
    if (!fs::is_regular_file(run_json, ec)) continue;
    try {
      const nlohmann::json run = tpb::read_json_file(run_json.string());
      if (run.at("scenario").value("source", "") == scenario_path && e.path().string() > best) best = e.path().string();
    } catch (const std::exception&) {
    }
  }
  return best;
}

void print_table(const std::string& run_dir) {
  const auto records = tpb::read_results((fs::path(run_dir) / "results.jsonl").string());
  std::printf("\n#%14s %12s %8s %6s %12s %10s %10s %8s  %s\n", "size (B)", "count", "type", "redop", "time (us)",
              "algbw GB/s", "busbw GB/s", "#wrong", "backend");
  double busbw_sum = 0;
  int busbw_n = 0;
  for (const auto& r : records) {
    if (!r.is_object() || r.value("role", "") != "sweep") continue;
    const nlohmann::json& p = r.value("params", nlohmann::json::object());
    const std::int64_t bytes = p.value("message_bytes", std::int64_t{0});
    const std::string dtype = p.value("dtype", std::string("?"));
    const std::int64_t elem = dtype == "f32" ? 4 : 2;
    const nlohmann::json lat = r.value("latency", nlohmann::json::object());
    const nlohmann::json thr = r.value("throughput", nlohmann::json::object());
    const double mean = lat.is_object() ? lat.value("mean", NAN) : NAN;
    const double algbw = thr.is_object() ? thr.value("algbw_GBps", NAN) : NAN;
    const double busbw = thr.is_object() ? thr.value("busbw_GBps", NAN) : NAN;
    std::string wrong = r.value("status", "") == "ok" ? "-" : r.value("status", "");
    const auto checks = r.value("checks", nlohmann::json::object());
    if (checks.is_object() && checks.contains("matches_reference"))
      wrong = checks["matches_reference"].value("status", "") == "pass" ? "0" : "wrong";
    std::printf(" %14lld %12lld %8s %6s %12.2f %10.2f %10.2f %8s  %s\n", static_cast<long long>(bytes),
                static_cast<long long>(bytes / elem), dtype.c_str(), "sum", mean, algbw, busbw, wrong.c_str(),
                p.value("allreduce", std::string("?")).c_str());
    if (std::isfinite(busbw)) {
      busbw_sum += busbw;
      ++busbw_n;
    }
  }
  std::printf("# Avg bus bandwidth    : %g GB/s (over %d sizes)\n", busbw_n > 0 ? busbw_sum / busbw_n : 0.0, busbw_n);
}

int run_allreduce(const tpb::cli::Args& a) {
  const std::int64_t min = parse_size("-b", a.value_or("-b", "1K"));
  const std::int64_t max = parse_size("-e", a.value_or("-e", "1M"));
  const int factor = parse_int("-f", a.value_or("-f", "2"), 2);
  const int tp = parse_int("-g", a.value_or("-g", "2"), 1);
  const int iters = parse_int("-n", a.value_or("-n", "20"), 1);
  const int warmup = parse_int("-w", a.value_or("-w", "5"), 0);
  TPB_INPUT_CHECK(min <= max, "allreduce: -b " << min << " is larger than -e " << max);
  const std::string dtype = a.value_or("--dtype", "f32");
  TPB_INPUT_CHECK(dtype == "bf16" || dtype == "f16" || dtype == "f32",
                  "allreduce: --dtype: expected bf16, f16 or f32, got '" << tpb::cut_for_message(dtype) << "'");
  const tpb::MachineInfo machine = tpb::detect_machine();
  const bool gpu = machine.cuda && machine.gpu_count > 0;
  const std::vector<std::string> backends = split_commas(a.value_or("--backend", gpu ? "nccl" : "shm"));
  std::vector<std::int64_t> sizes;
  const std::int64_t elem = dtype == "f32" ? 4 : 2;
  for (std::int64_t s = min; s <= max && sizes.size() < 64; s *= factor) sizes.push_back((s + elem - 1) / elem * elem);
  nlohmann::json scenario = {
      {"schema", 1},
      {"name", "allreduce-cli"},
      {"description", "tpbench allreduce from the command line: " + std::to_string(sizes.size()) + " sizes from " +
                          std::to_string(min) + " to " + std::to_string(max) + " bytes, x" + std::to_string(factor) +
                          ", TP " + std::to_string(tp)},
      {"workload", "allreduce"},
      {"device", gpu ? "cuda" : "cpu"},
      {"sweep", {{"tp", {tp}}, {"allreduce", backends}, {"dtype", {dtype}}, {"message_bytes", sizes}}},
      {"measure", {{"warmup", warmup}, {"iterations", iters}}},
      {"checks", backends.size() > 1 ? nlohmann::json{"matches_reference", "equal_across_allreduce"}
                                     : nlohmann::json{"matches_reference"}}};
  if (gpu) scenario["sweep"]["cuda_graph"] = {true};
  // The scenario beside the runs, named by the time: a record's reproduce command reads it.
  const std::string root = a.value_or("--results-dir", "results");
  fs::create_directories(root);
  const auto stamp = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string path = fs::absolute(fs::path(root) / ("allreduce-cli-" + std::to_string(stamp) + ".json")).string();
  std::ofstream(path) << scenario.dump(1) << "\n";
  std::printf("tpbench allreduce: scenario %s\n", path.c_str());
  std::fflush(stdout);
  const tpb::cli::Subcommand* run = nullptr;
  for (const auto& s : tpb::cli::registry())
    if (std::string(s.name) == "run") run = &s;
  TPB_CHECK(run != nullptr, "the run subcommand is registered");
  const int rc = run->run(tpb::cli::parse_args(run->grammar, {path, "--results-dir", root, "--no-report"}));
  const std::string run_dir = run_dir_of(root, path);
  if (!run_dir.empty()) print_table(run_dir);
  return rc;
}

}  // namespace

TPB_SUBCOMMAND("allreduce", "An nccl-tests-style allreduce sweep from the command line (-b -e -f -g)", kUsage,
               kGrammar, run_allreduce);
