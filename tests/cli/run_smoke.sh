# tpbench run on ci-smoke: exit 0 in < 60 s, results.jsonl valid (every schema key, provenance
# with the git sha), the same case ids in the same order as --dry-run, run.json with the
# full provenance.
source "$(dirname "$0")/common.bash" "$@"

expect_rc 0 "$TPBENCH" run scenarios/ci-smoke.json --dry-run
grep -v '^#' "$SCRATCH/last.out" | awk '{print $1}' >"$SCRATCH/dry-ids"
[[ $(wc -l <"$SCRATCH/dry-ids") -ge 2 ]] || fail "dry run listed no cases"

start=$(date +%s%N)
expect_rc 0 "$TPBENCH" run scenarios/ci-smoke.json --no-report --results-dir "$SCRATCH/results"
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "ci-smoke took ${elapsed_ms} ms"
(( elapsed_ms < 60000 )) || fail "ci-smoke took ${elapsed_ms} ms (limit 60 s)"
grep -q "report" "$SCRATCH/last.out" && fail "--no-report still mentions a report"
run=$(run_dir_of "$SCRATCH/results")

python3 - "$run" "$SCRATCH/dry-ids" <<'PY'
import json, sys
run, dry = sys.argv[1], sys.argv[2]
records = [json.loads(line) for line in open(f"{run}/results.jsonl")]
keys = {"schema", "run_id", "case_id", "label", "params", "status", "error", "plan", "memory", "latency",
        "throughput", "digests", "checks", "baseline", "provenance"}
for r in records:
    missing = keys - set(r)
    assert not missing, f"{r.get('case_id')}: missing {missing}"
    assert r["status"] == "ok", r
    assert r["provenance"]["git_sha"], r["provenance"]
    assert r["latency"]["unit"] == "us" and r["latency"]["p50"] > 0, r["latency"]
    assert len(r["digests"]) == r["params"]["tp"], r["digests"]
ids = [r["case_id"] for r in records]
want = [l.strip() for l in open(dry) if l.strip()]
assert ids == want, f"run ids {ids} != dry-run ids {want}"
run_json = json.load(open(f"{run}/run.json"))
for k in ("hostname", "start_time", "git_sha", "git_dirty", "env", "gpus", "topology", "compiler"):
    assert k in run_json["provenance"], k
assert [c["case_id"] for c in run_json["cases"]] == want
assert run_json["summary"]["exit_code"] == 0
verdicts = [v["status"] for r in records for v in r["checks"].values()]
assert verdicts and all(v == "pass" for v in verdicts), verdicts
print(f"{len(records)} records ok")
PY
