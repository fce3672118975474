# Issue 17, finding 6 ("silent nonsense"): a denormal timeout, tolerances >= 1024, `control {}`,
# a `min_duration_s` accepted and ignored, `matches_reference` on an engine scenario accepted
# and then failing every case, duplicate keys. Each is now refused at validation (exit 2,
# the file and the JSON path), nothing run.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
# $1: base scenario, $2: python statement on `s`, $3: the message expected
refused() {
  python3 - "$1" "$SCRATCH/s.json" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(s, open(sys.argv[2], "w"))
PY
  expect_rc 2 "$TPBENCH" run "$SCRATCH/s.json" --dry-run
  grep -qF "s.json: $3" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "not refused: $2"; }
}
AR=scenarios/conformance/cpu-shm-allreduce.json
EN=scenarios/conformance/cpu-engine-observer.json
refused $AR 's["measure"]["timeout_s"] = 5e-324' '$.measure.timeout_s: expected a number in [0.1, 86400]'
refused $AR 's["measure"]["min_duration_s"] = 3' '$.measure.min_duration_s: not supported yet'
refused $AR 's["baseline"] = {"latency_rel_tol": 1024, "latency": "informational"}' '$.baseline.latency_rel_tol: expected a number in [0, 10]'
refused $AR 's["control"] = {}' '$.control: expected an object {axis: value} naming at least one axis'
refused $EN 's["checks"] = ["matches_reference"]' '$.checks[0]: expected a check that applies to the engine workload'
# A duplicate key (the last one used to win silently).
printf '{"schema": 1, "name": "dup", "workload": "allreduce", "workload": "engine"}' >"$SCRATCH/dup.json"
expect_rc 2 "$TPBENCH" run "$SCRATCH/dup.json" --dry-run
grep -q 'dup.json.*duplicate key' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "a duplicate key was accepted"; }
echo ok
