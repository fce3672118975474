# A scenario with three planted errors: three messages naming file and JSON path, exit 2,
# nothing written; and a bad scenario given with --resume leaves the earlier results intact.
source "$(dirname "$0")/common.bash" "$@"

bad="$SCRATCH/bad.json"
cat >"$bad" <<'JSON'
{"schema": 1, "name": "planted", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [1, 0], "allreduce": ["shm"], "mem_fraction": [1.5], "message_bytes": [1024]},
 "measure": {"iterations": 3}, "checks": ["deterministic"], "colour": "blue"}
JSON
expect_rc 2 "$TPBENCH" run "$bad" --results-dir "$SCRATCH/results"
cat "$SCRATCH/last.out"
n=$(grep -c "^$bad: \\$" "$SCRATCH/last.out" || true)
[[ $n -eq 3 ]] || fail "expected 3 problem lines, got $n"
grep -q "^$bad: \$.sweep.tp\[1\]: expected a positive integer, got 0$" "$SCRATCH/last.out" || fail "tp problem"
grep -q "^$bad: \$.sweep.mem_fraction\[0\]: expected a fraction in (0, 1\], got 1.5$" "$SCRATCH/last.out" || fail "mem_fraction problem"
grep -q "^$bad: \$.colour: unknown key" "$SCRATCH/last.out" || fail "unknown key problem"
[[ ! -e "$SCRATCH/results" ]] || fail "a rejected scenario wrote results"
expect_rc 2 "$TPBENCH" run "$bad" --dry-run

# An earlier run, then the bad scenario pointed at it: exit 2, its files untouched.
good="$SCRATCH/good.json"
sed -e 's/"tp": \[1, 0\]/"tp": [1, 2]/' -e 's/"mem_fraction": \[1.5\]/"mem_fraction": [0.5]/' -e 's/, "colour": "blue"//' "$bad" >"$good"
expect_rc 0 "$TPBENCH" run "$good" --no-report --results-dir "$SCRATCH/results"
run=$(run_dir_of "$SCRATCH/results")
before=$(cat "$run/results.jsonl" "$run/run.json" | md5sum)
expect_rc 2 "$TPBENCH" run "$bad" --no-report --resume "$run"
after=$(cat "$run/results.jsonl" "$run/run.json" | md5sum)
[[ "$before" == "$after" ]] || fail "a rejected scenario changed the earlier run"
# Invalid JSON: one message with line and column.
printf '{\n "schema": 1,\n "name": x\n}\n' >"$SCRATCH/syntax.json"
expect_rc 2 "$TPBENCH" run "$SCRATCH/syntax.json"
grep -q "syntax.json:3:" "$SCRATCH/last.out" || fail "syntax error without line:column"
echo ok
