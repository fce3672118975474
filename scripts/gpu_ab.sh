#!/usr/bin/env bash
# tpb_bench of the working tree (B) against another commit's (A), side by side in one
# device-machine call: A and B alternate AB_ROUNDS times (default 2) on each filter, A first in
# odd rounds and B first in even ones, so a drift of the machine within the call lands on both,
# and one table gives each benchmark's median over the rounds, A and B, and B / A. Exits 1 when
# a run failed, ran no benchmark, or left no pair to compare.
#   A: AB_BASE (default ab-base.tar), a `git archive` of the commit to compare with, e.g.
#      git archive -o ab-base.tar main      (untracked, so it travels with the working tree)
#   AB_FILTERS: tpb_bench --benchmark_filter values, separated by spaces, each run in its own
#      process (default: the batch-1 decode attention and the batch-1 layer benchmark)
#   AB_COUNTERS: the counters tabled beside real_time (comma separated; those a benchmark
#      lacks are left out)
#   usage: scripts/gpu_ab.sh OUTDIR        (OUTDIR receives ab.json and ab_table.md)
# shellcheck disable=SC2034  # read by gpu_call_common.bash
GPU_CALL_TARGETS="tpb_bench"
source "$(dirname "$0")/gpu_call_common.bash" "$@"
BASE_TAR=${AB_BASE:-ab-base.tar}
[ -f "$BASE_TAR" ] || { echo "no $BASE_TAR: git archive -o $BASE_TAR <commit> first"; exit 2; }
A_DIR=$(mktemp -d /tmp/tpb-ab-a.XXXXXX)
step "build A ($BASE_TAR)"
tar -xf "$BASE_TAR" -C "$A_DIR"
(cd "$A_DIR" && cmake --preset cuda >/dev/null && bounded 300 cmake --build build-cuda -j "$(nproc)" --target tpb_bench) \
  >"$OUT/build_a.log" 2>&1 || { tail -30 "$OUT/build_a.log"; echo "BUILD OF A FAILED"; exit 1; }

RAW=$(mktemp -d /tmp/tpb-ab-raw.XXXXXX)
FAILED=0
read -r -a FILTERS <<<"${AB_FILTERS:-attention/mla_decode/wgmma/heads:64/batch:1/ layer/moe_decode/tp:[12]/batch:1/}"
for ((round = 1; round <= ${AB_ROUNDS:-2}; ++round)); do
  for f in "${!FILTERS[@]}"; do
    order="A B"
    [ $((round % 2)) = 0 ] && order="B A"
    for side in $order; do
      bench=build-cuda/bench/tpb_bench
      [ "$side" = A ] && bench=$A_DIR/build-cuda/bench/tpb_bench
      step "round $round, $side ($(left) s left)"
      BENCH=$bench bench_json 240 "${FILTERS[$f]}" "$RAW/$side.$f.$round.json" || FAILED=1
      # Google Benchmark exits 0 when a filter matches nothing (names end in
      # /iterations:N/manual_time, so a filter ending in $ matches none).
      grep -q '"name"' "$RAW/$side.$f.$round.json" 2>/dev/null ||
        { echo "  NO BENCHMARK RAN for ${FILTERS[$f]}: $(tail -1 "$RAW/$side.$f.$round.log")"; FAILED=1; }
    done
  done
done

step table
python3 - "$RAW" "$OUT" "${AB_COUNTERS:-vs_copy_bw,moe_layer_us,dense_layer_us,head_us,step_us,step_x_weight_read_time}" <<'PY'
import collections, glob, json, os, statistics, sys
raw, out, counters = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
runs = collections.defaultdict(lambda: collections.defaultdict(list))  # name -> "A:key" -> values
merged = {"A": [], "B": []}
for path in sorted(glob.glob(raw + "/*.json")):
    side = os.path.basename(path).split(".")[0]
    try:
        doc = json.load(open(path))
    except ValueError as e:
        print(f"{path}: {e}")
        continue
    for b in doc.get("benchmarks", []):
        if b.get("error_occurred") or b.get("skipped"):  # a skipped benchmark reports time 0
            continue
        b["ab_file"] = os.path.basename(path)
        merged[side].append(b)
        for key in ["real_time"] + counters:
            if key in b:
                runs[b["name"]][f"{side}:{key}"].append(b[key])
json.dump(merged, open(out + "/ab.json", "w"), indent=1)
lines = ["| benchmark | value | A (median) | B (median) | B / A | rounds |", "| --- | --- | --- | --- | --- | --- |"]
pairs = 0
for name, vals in runs.items():
    for key in ["real_time"] + counters:
        a, b = vals.get("A:" + key), vals.get("B:" + key)
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = f"{mb / ma:.3f}" if ma else "n/a"
        lines.append(f"| {name} | {key} | {ma:.4g} | {mb:.4g} | {ratio} | {len(a)}, {len(b)} |")
        pairs += 1
open(out + "/ab_table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if pairs else "no benchmark ran on both sides")
PY
[ $? = 0 ] || FAILED=1
step done
exit "$FAILED"
