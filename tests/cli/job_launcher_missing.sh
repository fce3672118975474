#!/usr/bin/env bash
# Issue 19: a job launcher that cannot be started (here srun, where Slurm is not installed, or
# any launcher not on PATH) fails each case of the sweep with the reason, at once, instead of
# waiting out the timeout; the command it tried is recorded, and nothing is left behind.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
cat >"$SCRATCH/s.json" <<'JSON'
{"schema": 1, "name": "no-launcher", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [2], "allreduce": ["shm"], "dtype": ["f32"], "message_bytes": [4096]},
 "measure": {"warmup": 1, "iterations": 3, "timeout_s": 60}, "checks": []}
JSON
mkdir -p "$SCRATCH/bin"  # a PATH without srun, whatever this machine has
for tool in bash python3; do ln -s "$(command -v $tool)" "$SCRATCH/bin/$tool"; done
TPB_TEST_MARK=$MARK PATH="$SCRATCH/bin" expect_rc 1 "$TPBENCH" run "$SCRATCH/s.json" --launcher srun --no-report \
  --results-dir "$SCRATCH/r"
run=$(run_dir_of "$SCRATCH/r")
python3 - "$run" <<'PY' || { cat "$SCRATCH/last.out"; fail "wrong record"; }
import json, sys
rec = json.loads(open(sys.argv[1] + "/results.jsonl").readline())
assert rec["status"] == "failed", rec["status"]
first = rec["error"].split("\n")[0]
assert first == "srun exited with status 127 with no result from ranks 0, 1", first
assert "cannot run the job launcher (is it installed and on PATH?): No such file or directory" in rec["error"], rec["error"]
assert rec["launch_command"][:4] == ["srun", "--ntasks=2", "--kill-on-bad-exit=1", "--export=ALL"], rec["launch_command"]
assert rec["wall_s"] < 30, rec["wall_s"]
print("srun missing:", first)
PY
# The controller's pid, from its group's log name (logs/tpb<pid>-g0-srun.log), for the /dev/shm check.
log=$(compgen -G "$run/logs/tpb*-g0-srun.log") || fail "no srun log in $run/logs"
controller=${log##*/tpb}
expect_nothing_left "${controller%%-*}" "srun missing"
echo ok
