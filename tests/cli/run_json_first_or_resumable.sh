# Issue 37, finding 6: a disk that filled (or a folder that turned read-only) before the first
# run.json was written left an empty results/<run-id>/ that `--resume` refused ("not a tpbench
# run folder"), while the error said "run.json is unchanged". Now a run folder appears with its
# run.json or not at all, and the message says which: "the run was not started, and nothing of
# it was left in ROOT"; a failure once the folder exists says the folder keeps its run.json and
# every record and that `tpbench run --resume DIR` finishes the run, which it then does.
# The full disk is RLIMIT_FSIZE with SIGXFSZ ignored (writes past it fail with EFBIG): neither
# root nor a small file system is needed.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"

# No source location, no library text, one line.
plain_failure() {
  [[ $(wc -l <"$SCRATCH/last.out") -le 2 ]] || { cat "$SCRATCH/last.out"; fail "$1: more than the start line and the error"; }
  ! grep -Eq '\.(cpp|h):[0-9]|json\.exception|filesystem error' "$SCRATCH/last.out" ||
    { cat "$SCRATCH/last.out"; fail "$1: the message shows internals"; }
}

# 1. No room for the first run.json: nothing of the run is left, and the message says so.
(trap '' XFSZ; ulimit -f 2; expect_rc 1 "$TPBENCH" run scenarios/conformance/cpu-shm-allreduce.json --no-report --results-dir "$SCRATCH/full")
grep -Eq "^tpbench run: failed: $SCRATCH/full/[^/]+/run.json: cannot be written \(write failed: File too large\); the run was not started, and nothing of it was left in $SCRATCH/full\$" \
  "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "no room for run.json: not said what was left"; }
plain_failure "no room for run.json"
[[ -z $(ls -A "$SCRATCH/full") ]] || fail "no room for run.json: left in the results folder: $(ls -A "$SCRATCH/full")"

# 2. A results folder that takes no new folder (as a user; root writes anywhere).
mkdir -p "$SCRATCH/ro" && chmod 555 "$SCRATCH/ro"
if ! mkdir "$SCRATCH/ro/probe" 2>/dev/null; then
  expect_rc 1 "$TPBENCH" run scenarios/conformance/cpu-shm-allreduce.json --no-report --results-dir "$SCRATCH/ro"
  grep -q "cannot be written (cannot create a folder in $SCRATCH/ro: Permission denied); the run was not started" \
    "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "read-only results folder: not said"; }
  plain_failure "read-only results folder"
  [[ -z $(ls -A "$SCRATCH/ro") ]] || fail "read-only results folder: something was left"
else
  rmdir "$SCRATCH/ro/probe"
  echo "read-only results folder: not run (root writes anywhere)"
fi
chmod 755 "$SCRATCH/ro"

# 3. The disk fills after run.json, while the records are written: the folder keeps run.json and
# the whole records, the message says `--resume` finishes it, and it does. The cases use the mpi
# backend under the fork launcher, so each is recorded `skipped` without starting a rank (ranks
# would meet the file size limit in their shared memory first).
python3 - "$SCRATCH/fills.json" <<'PY'
import json, sys
json.dump({"schema": 1, "name": "fills-the-disk", "workload": "allreduce", "device": "cpu",
           "sweep": {"tp": [1, 2], "dtype": ["f32", "bf16"], "allreduce": ["mpi"],
                     "message_bytes": [64 * (i + 1) for i in range(25)]}}, open(sys.argv[1], "w"))
PY
(trap '' XFSZ; ulimit -f 64; expect_rc 1 "$TPBENCH" run "$SCRATCH/fills.json" --no-report --results-dir "$SCRATCH/later")
run=$(run_dir_of "$SCRATCH/later")
grep -q "File too large (the partial line was removed; earlier records are intact); $run keeps its run.json and every record written so far: \`tpbench run --resume $run\` finishes the run\$" \
  "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "a later failure: not said that --resume finishes the run"; }
! grep -Eq '\.(cpp|h):[0-9]|json\.exception' "$SCRATCH/last.out" || fail "a later failure shows internals"
[[ -f $run/run.json ]] || fail "a later failure: run.json is gone"
written=$(wc -l <"$run/results.jsonl")
(( written > 0 && written < 100 )) || fail "the disk was meant to fill mid-run; $written of 100 records were written"
expect_rc 3 "$TPBENCH" run --resume "$run" --no-report  # every case skipped: nothing ran (3)
python3 - "$run" <<'PY' || fail "the resumed run is not whole"
import json, sys
run = sys.argv[1]
planned = [c["case_id"] for c in json.load(open(run + "/run.json"))["cases"]]
ids = [json.loads(line)["case_id"] for line in open(run + "/results.jsonl")]
assert sorted(ids) == sorted(planned) and len(set(ids)) == 100, (len(ids), len(set(ids)))
PY
echo ok
