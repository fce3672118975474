#!/usr/bin/env bash
# Issue 34, point 7: a one-off allreduce sweep from the command line, as nccl-tests' -b -e -f -g,
# with its columns (size, count, type, redop, time, algbw, busbw, #wrong) and its closing "Avg bus
# bandwidth" line, every number from the run's records; the scenario it built is kept, so a
# record's reproduce command reruns its case; bad sizes are refused with exit 2.
source "$(dirname "$0")/common.bash" "$@"
cd "$SCRATCH"
expect_rc 0 "$TPBENCH" allreduce -b 1K -e 16K -f 4 -g 2 --results-dir "$SCRATCH/r"
grep -qE "^# +size \(B\) +count +type +redop +time \(us\) +algbw GB/s +busbw GB/s +#wrong +backend$" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "no nccl-tests header"; }
grep -qE "^# Avg bus bandwidth +: [0-9.e+-]+ GB/s \(over 3 sizes\)$" "$SCRATCH/last.out" || fail "no average bus bandwidth line"
run=$(ls -d "$SCRATCH"/r/*/ | head -1)
python3 - "$SCRATCH/last.out" "$run/results.jsonl" <<'PY' || fail "the table does not trace to the records"
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and l.split()[0].isdigit()]
recs = {r["params"]["message_bytes"]: r for r in map(json.loads, open(sys.argv[2])) if r["role"] == "sweep"}
assert [int(r[0]) for r in rows] == [1024, 4096, 16384], rows
for r in rows:
    rec = recs[int(r[0])]
    assert int(r[1]) == int(r[0]) // 4 and r[2] == "f32" and r[3] == "sum" and r[8] == "shm", r
    assert abs(float(r[4]) - rec["latency"]["mean"]) < 0.006, (r[4], rec["latency"]["mean"])
    assert abs(float(r[6]) - rec["throughput"]["busbw_GBps"]) < 0.006, (r[6], rec["throughput"])
    assert r[7] == "0" and rec["checks"]["matches_reference"]["status"] == "pass", r
PY
reproduce=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['reproduce'])" "$run/results.jsonl")
[[ $reproduce == *allreduce-cli-*.json* ]] || fail "the reproduce command does not name the kept scenario: $reproduce"
set +e; eval "$(printf '%q' "$TPBENCH") ${reproduce#tpbench } --no-report --results-dir $SCRATCH/again" >"$SCRATCH/again.out" 2>&1; rc=$?; set -e
[[ $rc -eq 0 ]] || { cat "$SCRATCH/again.out" >&2; fail "the reproduce command failed ($rc)"; }
expect_rc 2 "$TPBENCH" allreduce -f 1
grep -qF -- "tpbench allreduce: error: -f: expected >= 2, got 1" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "-f 1"; }
expect_rc 2 "$TPBENCH" allreduce -b 2K -e 1K
grep -qF -- "-b 2048 is larger than -e 1024" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "-b > -e"; }
expect_rc 2 "$TPBENCH" allreduce -b 1X
grep -qF -- "-b: expected a size in bytes such as 64, 8K, 128M or 1G, got '1X'" "$SCRATCH/last.out" || fail "-b 1X"
echo ok
