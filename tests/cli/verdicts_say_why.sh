#!/usr/bin/env bash
# Issue 34, point 3: a comparison that gives no verdict says why, in plain text. compare of two
# ci-smoke runs (1 repetition a case) printed insufficient-data on every latency row and
# "0 regression(s)" with the reason only in --json; a run with --baselines of a scenario that
# declares latency informational says so in its last lines.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
smoke_tp2 "$SCRATCH/smoke.json"
run() { "$TPBENCH" run "$SCRATCH/smoke.json" --no-report "$@"; }
expect_rc 0 run --results-dir "$SCRATCH/a"
expect_rc 0 run --results-dir "$SCRATCH/b"
A=$(run_dir_of "$SCRATCH/a")/results.jsonl B=$(run_dir_of "$SCRATCH/b")/results.jsonl
expect_rc 0 "$TPBENCH" compare "$A" "$B"
grep -Eq "^[0-9]+ rows insufficient-data: the Mann-Whitney U test needs 9 per-repetition medians on each side" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "compare does not say why its latency rows have no verdict"; }
expect_rc 0 "$TPBENCH" compare --json "$A" "$B"
python3 -c "
import json, sys
notes = json.load(open(sys.argv[1]))['notes']
assert any('insufficient-data' in n for n in notes), notes" "$SCRATCH/last.out" || fail "compare --json has no notes"
# Memory rows in MiB (issue 34, point 11: compare printed 7.2767e+06 bytes): the same records
# with 7,630,000 used bytes on OLD's rank 0 and 8,000,000 on NEW's.
python3 - "$A" "$B" "$SCRATCH/mem-old.jsonl" "$SCRATCH/mem-new.jsonl" <<'PY'
import json, sys
for src, dst, used in ((sys.argv[1], sys.argv[3], 7630000), (sys.argv[2], sys.argv[4], 8000000)):
    out = []
    for line in open(src):
        r = json.loads(line)
        r["memory"] = [{"after_weights": {"used_bytes": used}}]
        out.append(json.dumps(r) + "\n")
    open(dst, "w").write("".join(out))
PY
set +e; "$TPBENCH" compare "$SCRATCH/mem-old.jsonl" "$SCRATCH/mem-new.jsonl" >"$SCRATCH/last.out" 2>&1; set -e
grep -Eq "memory\.rank0\.after_weights +7\.28 MiB +7\.63 MiB +1\.0485 " "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "memory is not printed in MiB"; }
grep -q "e+06" "$SCRATCH/last.out" && { cat "$SCRATCH/last.out" >&2; fail "a byte count printed in e-notation"; }
# A run against a baseline of a scenario with latency informational (ci-smoke declares it).
mkdir -p "$SCRATCH/bl"
expect_rc 0 run --results-dir "$SCRATCH/c" --baselines "$SCRATCH/bl" --update-baselines --force-dirty-baseline "cli test"
set +e; run --results-dir "$SCRATCH/d" --baselines "$SCRATCH/bl" --allow-unlike-baseline >"$SCRATCH/last.out" 2>&1; set -e
grep -qF 'latency: informational ($.baseline.latency): the ratios are recorded, no latency verdict is given (1 repetition per case; the U test needs 9)' \
  "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "the run does not say its latency is informational"; }
echo ok
