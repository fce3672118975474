// What this binary was built from: recorded in every run's provenance, so that a baseline
// is only compared with results of a known build (lesson 3: re-run under the same build).
#pragma once

namespace tpb {

struct BuildInfo {
  const char* version;          // tpbench version (CMake project version)
  const char* git_sha;          // HEAD of the source tree at build time, or "unknown"
  bool git_dirty;               // tracked files differed from HEAD at build time
  const char* build_type;       // CMAKE_BUILD_TYPE
  const char* cxx_compiler;     // e.g. "GNU 12.2.0"
  const char* cxx_flags;        // CMAKE_CXX_FLAGS + CMAKE_CXX_FLAGS_<BUILD_TYPE>, e.g. "-O3 -DNDEBUG"
  const char* cuda_compiler;    // nvcc version, empty when built without CUDA
  const char* cuda_flags;       // CMAKE_CUDA_FLAGS + CMAKE_CUDA_FLAGS_<BUILD_TYPE>, empty without CUDA
  const char* cuda_architectures;  // CMAKE_CUDA_ARCHITECTURES, comma-separated ("90"), empty without CUDA
  const char* nccl_version;     // NCCL headers built against, empty without NCCL
  bool have_cuda;               // CUDA kernels and GPU backends linked in
  bool have_nccl;               // the nccl backend linked in
};

const BuildInfo& build_info();

}  // namespace tpb
