// tpb_bench entry point. GPU collectives need one process per GPU, so main() forks one rank
// per GPU BEFORE any CUDA call; ranks share a MAP_SHARED bootstrap (bench_ranks.h). Every
// rank runs the same benchmarks with fixed iteration counts (so the collectives pair up);
// only rank 0 reports (console and --benchmark_out). Flags of our own:
//   --tpb_ranks=N        ranks (default: every visible GPU, probed in a child)
//   --tpb_max_mib=M      largest message, MiB (default 256)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/attention_bench.h"
#include "bench/bench_ranks.h"
#include "bench/expert_int4_bench.h"
#include "bench/gemm_bench.h"
#include "bench/layer_bench.h"

namespace {

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  int ranks = -1;
  std::size_t max_mib = 256;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tpb_ranks=", 12) == 0) {
      ranks = std::atoi(argv[i] + 12);
    } else if (std::strncmp(argv[i], "--tpb_max_mib=", 14) == 0) {
      max_mib = static_cast<std::size_t>(std::atoll(argv[i] + 14));
    } else {
      args.push_back(argv[i]);
    }
  }
  if (ranks < 0) ranks = tpb::bench::probe_gpu_count();
  const std::string topology = tpb::bench::command_output("nvidia-smi topo -m 2>/dev/null");

  return tpb::bench::run_forked(ranks, [&](tpb::bench::RankContext& ctx) {
    // Non-zero ranks must not write the output file rank 0 writes.
    std::vector<char*> my_args;
    for (char* a : args)
      if (ctx.rank == 0 || std::strncmp(a, "--benchmark_out", 15) != 0) my_args.push_back(a);
    int my_argc = static_cast<int>(my_args.size());
    benchmark::Initialize(&my_argc, my_args.data());
    tpb::bench::register_allreduce_benchmarks(ctx, max_mib << 20, topology);
    // Single-GPU benchmarks run on rank 0 only, after the collectives (which need every rank).
    if (ctx.rank == 0) {
      tpb::bench::register_gemm_benchmarks(ctx);
      tpb::bench::register_expert_benchmarks(ctx);
      tpb::bench::register_expert_int4_benchmarks(ctx);
      tpb::bench::register_attention_benchmarks(ctx);
      tpb::bench::register_layer_benchmarks(ctx);
    }
    if (ctx.rank == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      // Display reporter only: a file reporter without --benchmark_out makes the library exit.
      NullReporter quiet;
      benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    benchmark::Shutdown();
    return 0;
  });
}
