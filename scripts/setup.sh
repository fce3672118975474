#!/usr/bin/env bash
# One command from a fresh Debian/Ubuntu machine to a result:
#   scripts/setup.sh run [tpbench args]   install what is missing, build (CUDA if found), run tpbench
#                                         (no args: the engine's default scenario on this machine,
#                                         quickstart-gpu or quickstart-cpu)
#   scripts/setup.sh test [ctest args]    install what is missing, build the ci preset, run ctest
#                                         (labels unit, cli, conformance; gpu tests skip without GPUs)
#   scripts/setup.sh asan [SECONDS]       install what is missing (clang and its sanitizer and
#                                         libFuzzer runtimes too), build the asan preset, run its
#                                         ctest (ASan+UBSan, CPU), then every fuzz target SECONDS
#                                         (default 30; 0: no fuzzing) with scripts/fuzz.sh
# Packages come from apt by name (sudo only when not root); apt is skipped when everything is
# already there. Builds go through ccache when it is installed.
set -euo pipefail

cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  run | test | asan) shift ;;
  *) echo "usage: scripts/setup.sh run [tpbench args] | test [ctest args] | asan [SECONDS]" >&2; exit 2 ;;
esac

# apt package -> a probe that says it (or an equivalent) is already present.
declare -A probes=(
  [cmake]="command -v cmake"
  [ninja-build]="command -v ninja"
  [g++]="command -v g++"
  [ccache]="command -v ccache"
  [libgtest-dev]="test -f /usr/include/gtest/gtest.h"
  [libgmock-dev]="test -f /usr/include/gmock/gmock.h"
  [libbenchmark-dev]="test -f /usr/include/benchmark/benchmark.h"
  [nlohmann-json3-dev]="test -f /usr/include/nlohmann/json.hpp"
  [python3]="command -v python3"
  [python3-pip]="python3 -m pip --version"
  [python3-matplotlib]="python3 -c 'import matplotlib'"
  [python3-lxml]="python3 -c 'import lxml'"
  # the schema test (tests/schemas/validate.py): draft 2020-12 needs jsonschema >= 4.0
  [python3-jsonschema]="python3 -c 'from jsonschema import Draft202012Validator'"
)
# The mpi backend and the mpirun launcher (docs/several-hosts.md): Open MPI's headers and its
# mpirun. Not for the asan preset, which builds without MPI.
if [[ $mode != asan ]]; then
  probes[libopenmpi-dev]="compgen -G '/usr/lib/*/openmpi/include/mpi.h'"
  probes[openmpi-bin]="command -v mpirun"
fi
# The asan preset's compiler, and its runtimes (Debian 12: libclang-rt-dev pulls the ASan, UBSan
# and libFuzzer archives of the default clang).
if [[ $mode == asan ]]; then
  probes[clang]="command -v clang++"
  probes[libclang-rt-dev]="test -f \"\$(clang++ --print-runtime-dir)/libclang_rt.fuzzer-x86_64.a\""
fi
missing=()
for pkg in "${!probes[@]}"; do
  bash -c "${probes[$pkg]}" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  echo "setup: installing with apt: ${missing[*]}"
  $sudo apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# matplotlib, lxml (tests/cli/junit_schema.sh validates JUnit with it) and jsonschema (>= 4.0:
# tests/schemas/validate.py) through pip only where apt's is missing or not importable (e.g. a
# pyenv python3).
for module in matplotlib lxml; do
  if ! python3 -c "import $module" >/dev/null 2>&1; then
    python3 -m pip install --user "$module" || python3 -m pip install --user --break-system-packages "$module"
  fi
done
if ! python3 -c 'from jsonschema import Draft202012Validator' >/dev/null 2>&1; then
  python3 -m pip install --user 'jsonschema>=4' || python3 -m pip install --user --break-system-packages 'jsonschema>=4'
fi

jobs=$(nproc)
# A clone in another folder still hits the compiler cache: ccache otherwise hashes the working
# directory of every build with debug info (the asan preset's -gline-tables-only), and CI
# builds a fresh clone. The cost: debug info may name the folder of the build that filled
# the cache.
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
# Presets and scenarios are found through $TPB_HOME wherever a test runs (ctest runs unit
# tests in the build folder).
export TPB_HOME=${TPB_HOME:-$PWD}
if [[ $mode == run ]]; then
  cmake --preset default
  cmake --build --preset default --target tpbench -j "$jobs"
  exec build/suite/tpbench "$@"
elif [[ $mode == asan ]]; then
  seconds=${1:-30}
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"
  if ((seconds > 0)); then exec scripts/fuzz.sh "$seconds"; fi
else
  cmake --preset ci
  # ptxas reports a kernel whose wgmma it had to serialize (C75xx, "Potential Performance
  # Loss") as an info line, not a warning, and such a kernel still passes every test: say so
  # here, and fail under TPB_STRICT_PTXAS=1 (CI, whose toolkit the kernels are tuned for; another
  # CUDA version's ptxas may schedule differently). The compiler cache replays the lines.
  build_log=$(mktemp)
  cmake --build --preset ci -j "$jobs" 2>&1 | tee "$build_log"
  serialized=$(grep -E "\(C75[0-9]{2}\) Potential Performance Loss: wgmma" "$build_log" || true)
  rm -f "$build_log"
  if [[ -n $serialized ]]; then
    echo "$serialized" >&2
    echo "setup.sh: ptxas serialized the wgmma instructions of the kernel(s) above; see docs/performance.md" >&2
    if [[ ${TPB_STRICT_PTXAS:-0} == 1 ]]; then exit 1; fi
  fi
  exec ctest --preset ci -j "$jobs" "$@"
fi
