#!/usr/bin/env bash
# Builds the asan preset (clang, ASan+UBSan, libFuzzer) and runs each fuzz target for a
# bounded time on its seed corpus (repository files, cut down by fuzz/make_seeds.py) and its
# regression inputs, growing a scratch corpus; prints executions per target and any finding.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
# Environment: TPB_FUZZ_WORK (scratch, default build-asan/fuzz-work; kept between runs, so a
# later run starts from the corpus an earlier one grew), TPB_FUZZ_JOBS (targets at once, 1).
# A finding is left as <work>/<target>/artifacts/crash-* (leak-*, timeout-*, oom-*); replay it
# with `build-asan/fuzz/<target> FILE`. Exit status 1 when any target found something.
set -euo pipefail
shopt -s globstar nullglob
cd "$(dirname "$0")/.."

seconds=${1:-60}
[[ $# -gt 0 ]] && shift
targets=("$@")
((${#targets[@]})) || targets=(scenario_fuzzer model_config_fuzzer safetensors_fuzzer results_fuzzer compare_fuzzer)
command -v clang++ >/dev/null || { echo "fuzz: clang++ is needed (apt install clang)" >&2; exit 2; }

cmake --preset asan >/dev/null
cmake --build --preset asan --target "${targets[@]}" -j "$(nproc)"
work=${TPB_FUZZ_WORK:-$PWD/build-asan/fuzz-work}
export TPB_HOME=${TPB_HOME:-$PWD}
source fuzz/seeds.sh

run_one() {
  local t=$1 dir=$work/$1
  rm -rf "$dir/seeds" "$dir/artifacts"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  mapfile -t files < <(seed_files "$t")
  python3 fuzz/make_seeds.py "$t" "$dir" "${files[@]}"
  cp fuzz/regressions/"$t"/* "$dir/seeds/" 2>/dev/null || true
  # -timeout: one input running 20 s is a finding; -rss_limit_mb: so is 4 GiB. The target's
  # scratch files go under the work folder (a crash leaves them there, not in /tmp).
  mkdir -p "$dir/tmp"
  TMPDIR=$dir/tmp build-asan/fuzz/"$t" "$dir/corpus" "$dir/seeds" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=4096 -dict="$dir/dict" -artifact_prefix="$dir/artifacts/" -print_final_stats=1 \
    >"$dir/log" 2>&1 || true
}

jobs=${TPB_FUZZ_JOBS:-1}
for t in "${targets[@]}"; do
  echo "fuzz: $t for ${seconds} s ($work/$t/log)"
  run_one "$t" &
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
done
wait

found=0
printf '\n%-22s %12s %10s %8s  %s\n' target executions exec/s corpus findings
for t in "${targets[@]}"; do
  dir=$work/$t
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  artifacts=("$dir"/artifacts/*)
  printf '%-22s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "${#artifacts[@]}"
  if ((${#artifacts[@]})) || [[ -z $execs ]]; then
    found=1
    for a in "${artifacts[@]}"; do echo "  finding: $a"; done
    grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error:|fuzz: finding' "$dir/log" | sed 's/^/  /' || true
  fi
done
exit $found
