# Issue 37, finding 9: --junit into a place that cannot be written failed only after every case
# had run. Now it is refused before the first case, exit 2, naming the path and why; a
# writable path still works, also in folders that do not exist yet (they are created).
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
touch "$SCRATCH/a-file"
for bad in "$SCRATCH/a-file/j.xml" "$SCRATCH"; do
  expect_rc 2 "$TPBENCH" run scenarios/conformance/cpu-shm-allreduce.json --no-report --results-dir "$SCRATCH/runs" --junit "$bad"
  grep -q -- "--junit $bad: cannot be written" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "--junit $bad not refused first"; }
  [[ ! -d "$SCRATCH/runs" ]] || fail "a case ran before --junit $bad was refused"
done
mkdir -p "$SCRATCH/ro" && chmod 555 "$SCRATCH/ro"
if ! touch "$SCRATCH/ro/probe" 2>/dev/null; then  # root writes anywhere: the case is skipped there
  expect_rc 2 "$TPBENCH" run scenarios/conformance/cpu-shm-allreduce.json --no-report --results-dir "$SCRATCH/runs" --junit "$SCRATCH/ro/j.xml"
  grep -q "takes no new file" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "a read-only folder not named"; }
fi
chmod 755 "$SCRATCH/ro"
expect_rc 0 "$TPBENCH" run scenarios/conformance/cpu-shm-allreduce.json --no-report --results-dir "$SCRATCH/runs" --junit "$SCRATCH/new/folder/j.xml"
[[ -s "$SCRATCH/new/folder/j.xml" ]] || fail "a --junit path in folders still to be made got no file"
echo ok
