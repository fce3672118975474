#!/usr/bin/env bash
# ctest's fuzz.<target>: runs the target once on each of its seed files (fuzz/seeds.sh) and
# each regression input (fuzz/regressions/<target>/: findings, fixed). Any finding fails it.
#   fuzz/replay.sh BINARY TARGET LIBFUZZER(ON|OFF)     run from the repository root
set -euo pipefail
shopt -s globstar nullglob
binary=$1 target=$2 libfuzzer=$3
source fuzz/seeds.sh
mapfile -t inputs < <(seed_files "$target")
inputs+=(fuzz/regressions/"$target"/*)
echo "replay: $target on ${#inputs[@]} input(s)"
if [[ $libfuzzer == ON ]]; then
  # libFuzzer runs the files given and exits; -rss_limit_mb=0: an ASan build of a large seed
  # is not a leak.
  exec "$binary" -rss_limit_mb=0 "${inputs[@]}"
fi
exec "$binary" "${inputs[@]}"
