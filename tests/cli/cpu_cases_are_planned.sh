# Issue 37, finding 7: CPU engine cases inside the documented limits (batch_size or seq_len
# 2^30; up to 2^40 is allowed) died in the rank with std::bad_alloc, recorded `failed`: CPU
# cases were never planned. Now they are planned like GPU ones, against the host's memory
# (MemAvailable within the cgroup's limit, or --cpu-mem-gib): a case whose ranks cannot fit is
# recorded `infeasible` with the planner's sentence before any rank starts, and a run whose
# cases are infeasible or ok exits 0 (README: infeasible is no failure).
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"

scenario() {  # scenario FILE BATCHES SEQ_LENS
  cat >"$1" <<JSON
{"schema": 1, "name": "cpu-planned", "workload": "engine", "model": {"preset": "tiny-dsv3"}, "device": "cpu",
 "mode": ["decode"], "sweep": {"tp": [1], "batch_size": $2, "seq_len": $3, "allreduce": ["shm"]},
 "measure": {"warmup": 1, "iterations": 2, "repetitions": 1, "timeout_s": 120}}
JSON
}

# record RUN PYTHON: the assertions hold over `recs`, the run's records in file order.
records() {
  python3 - "$1" "$2" <<'PY'
import json, sys
recs = [json.loads(line) for line in open(sys.argv[1] + "/results.jsonl")]
exec(sys.argv[2])
PY
}

# 1. batch 2^30 and seq_len 2^30: infeasible with the planner's sentence, and no rank started.
scenario "$SCRATCH/huge.json" "[1073741824]" "[16]"
expect_rc 0 "$TPBENCH" run "$SCRATCH/huge.json" --no-report --results-dir "$SCRATCH/huge"
grep -Eq '^cases: 0 ok, 0 failed, 0 skipped, 1 infeasible' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "batch 2^30 is not infeasible"; }
grep -q "not enough memory: 1 rank of this case on one host needs .* TiB (per rank: weights .*), and the host has .* (MemAvailable\|.*the cgroup's limit" \
  "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "batch 2^30: not the planner's sentence"; }
run=$(run_dir_of "$SCRATCH/huge")
! compgen -G "$run/logs/*rank*" >/dev/null || fail "a rank was started for an infeasible case: $(ls "$run/logs")"
records "$run" '
r = recs[0]
assert len(recs) == 1 and r["status"] == "infeasible", r["status"]
assert r["error"].startswith("not enough memory: ") and r["error"] == r["plan"]["verdict"], r["error"]
assert r["plan"]["feasible"] is False and r["plan"]["needed_bytes"] > r["plan"]["host_memory_bytes"] > 0, r["plan"]
assert set(r["plan"]["breakdown"]) == {"weights", "kv_cache", "activations", "inputs"}, r["plan"]["breakdown"]
' || fail "batch 2^30: the record is not the planner's"
scenario "$SCRATCH/long.json" "[1]" "[1073741824]"
expect_rc 0 "$TPBENCH" run "$SCRATCH/long.json" --no-report --results-dir "$SCRATCH/long"
grep -Eq '^cases: 0 ok, 0 failed, 0 skipped, 1 infeasible' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "seq_len 2^30 is not infeasible"; }
! grep -q "bad_alloc" "$SCRATCH/last.out" || fail "seq_len 2^30: bad_alloc"

# 2. A sweep with both: the small case runs, the large one is planned out; exit 0.
scenario "$SCRATCH/both.json" "[2, 1073741824]" "[16]"
expect_rc 0 "$TPBENCH" run "$SCRATCH/both.json" --no-report --results-dir "$SCRATCH/both"
grep -Eq '^cases: 1 ok, 0 failed, 0 skipped, 1 infeasible' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "the small case did not run beside the infeasible one"; }

# 3. --cpu-mem-gib sets what a host gives: a case that runs by default is infeasible in 1 MiB,
# the sentence naming the option; a bad value is refused before anything runs.
scenario "$SCRATCH/small.json" "[4]" "[64]"
expect_rc 0 "$TPBENCH" run "$SCRATCH/small.json" --no-report --results-dir "$SCRATCH/small" --cpu-mem-gib 0.0009765625
grep -q "and the host has 1.00 MiB (--cpu-mem-gib 0.0009765625); at seq_len 64, not even batch_size 1 fits" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "--cpu-mem-gib: not in the sentence"; }
expect_rc 0 "$TPBENCH" run "$SCRATCH/small.json" --no-report --results-dir "$SCRATCH/small-ok" --cpu-mem-gib 4
grep -Eq '^cases: 1 ok, 0 failed, 0 skipped, 0 infeasible' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "4 GiB: the case did not run"; }
for bad in 0 -1 nan abc 1e9; do
  expect_rc 2 "$TPBENCH" run "$SCRATCH/small.json" --no-report --results-dir "$SCRATCH/bad" --cpu-mem-gib "$bad"
  grep -qF -- "tpbench run: error: --cpu-mem-gib: expected a number of GiB in (0, 16777216], got '$bad'" "$SCRATCH/last.out" ||
    { cat "$SCRATCH/last.out"; fail "--cpu-mem-gib $bad not refused"; }
done
[[ ! -e "$SCRATCH/bad" ]] || fail "a refused --cpu-mem-gib wrote a run"
echo ok
