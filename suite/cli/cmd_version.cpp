// tpbench version (also --version, -V): what this binary was built from, as every run's
// provenance records it (suite/records/build_info.h), so a bug report or a baseline can name it.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "reference_engine/comm/mpi_session.h"
#include "suite/records/build_info.h"
#include "suite/cli/subcommand.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench version [--json]      (also: tpbench --version, tpbench -V)\n"
    "What this binary was built from: version, git sha and whether the tree was dirty, build\n"
    "type, C++ compiler and flags, and whether CUDA, NCCL and MPI were built in (with their\n"
    "versions and the CUDA architectures). Run records carry the same in their provenance.\n"
    "  --json   one JSON object with those fields\n";

const tpb::cli::Grammar kGrammar = {{{"--json"}}, 0, ""};

// "yes (12.4, sm 90)" / "no": a library built in or not, with what says which.
std::string built_in(bool have, const std::string& detail) {
  if (!have) return "no";
  return detail.empty() ? "yes" : "yes (" + detail + ")";
}

int run_version(const tpb::cli::Args& args) {
  const tpb::BuildInfo& b = tpb::build_info();
  if (args.has("--json")) {
    const nlohmann::json j = {{"version", b.version},
                              {"git_sha", b.git_sha},
                              {"git_dirty", b.git_dirty},
                              {"build_type", b.build_type},
                              {"cxx_compiler", b.cxx_compiler},
                              {"cxx_flags", b.cxx_flags},
                              {"cuda", b.have_cuda},
                              {"cuda_compiler", b.cuda_compiler},
                              {"cuda_flags", b.cuda_flags},
                              {"cuda_architectures", b.cuda_architectures},
                              {"nccl", b.have_nccl},
                              {"nccl_version", b.nccl_version},
                              {"mpi", tpb::mpi_compiled_in()},
                              {"mpi_library", tpb::mpi_library_version()}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::string cuda_detail = b.cuda_compiler;
  if (*b.cuda_architectures) cuda_detail += std::string(cuda_detail.empty() ? "" : ", ") + "sm " + b.cuda_architectures;
  std::printf("tpbench %s (git %s%s)\n", b.version, b.git_sha, b.git_dirty ? "+dirty" : "");
  std::printf("build:    %s, %s, flags %s\n", b.build_type, b.cxx_compiler, b.cxx_flags);
  std::printf("cuda:     %s\n", built_in(b.have_cuda, cuda_detail).c_str());
  std::printf("nccl:     %s\n", built_in(b.have_nccl, b.nccl_version).c_str());
  std::printf("mpi:      %s\n", built_in(tpb::mpi_compiled_in(), tpb::mpi_library_version()).c_str());
  return 0;
}

}  // namespace

TPB_SUBCOMMAND("version", "Say what this binary was built from (also --version, -V)", kUsage, kGrammar, run_version);
