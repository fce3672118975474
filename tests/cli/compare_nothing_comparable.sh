# Issue 15, path 2: `tpbench compare results/A results/B` (run folders), an empty folder or
# /dev/null used to print "0 metrics compared, 0 regression(s)" and exit 0. Now compare
# takes run folders or results.jsonl on either side, and when nothing is comparable (a side
# with no ok record, no case id in common) it exits 2 with the reason.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
export CUDA_VISIBLE_DEVICES=

cat >"$SCRATCH/a.json" <<'JSON'
{"schema": 1, "name": "cmp", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [1, 2], "message_bytes": [64]}, "measure": {"iterations": 2}}
JSON
sed 's/"message_bytes": \[64\]/"message_bytes": [128]/' "$SCRATCH/a.json" >"$SCRATCH/other.json"
cat >"$SCRATCH/gpu.json" <<'JSON'
{"schema": 1, "name": "cmp", "workload": "allreduce", "device": "cuda",
 "sweep": {"tp": [1, 2], "allreduce": ["nccl"], "message_bytes": [64]}, "measure": {"iterations": 2}}
JSON
expect_rc 0 "$TPBENCH" run "$SCRATCH/a.json" --no-report --results-dir "$SCRATCH/A"
A=$(run_dir_of "$SCRATCH/A")
expect_rc 0 "$TPBENCH" run "$SCRATCH/a.json" --no-report --results-dir "$SCRATCH/B"
B=$(run_dir_of "$SCRATCH/B")
expect_rc 0 "$TPBENCH" run "$SCRATCH/other.json" --no-report --results-dir "$SCRATCH/O"
O=$(run_dir_of "$SCRATCH/O")
expect_rc 3 "$TPBENCH" run "$SCRATCH/gpu.json" --no-report --results-dir "$SCRATCH/G"
G=$(run_dir_of "$SCRATCH/G")
mkdir -p "$SCRATCH/empty"

# Run folders, results.jsonl files, or one of each: the same comparison.
for pair in "$A $B" "$A/results.jsonl $B/results.jsonl" "$A $B/results.jsonl"; do
  expect_rc 0 "$TPBENCH" compare $pair
  grep -Eq '^[1-9][0-9]* metrics compared, 0 regression\(s\)$' "$SCRATCH/last.out" \
    || { cat "$SCRATCH/last.out" >&2; fail "compare $pair compared nothing"; }
done

# expect_nothing_comparable REASON OLD NEW: exit 2, the one line on stderr, no table.
expect_nothing_comparable() {
  local want=$1; shift
  expect_rc 2 "$TPBENCH" compare "$@"
  grep -qxF "tpbench compare: error: nothing comparable: $want" "$SCRATCH/last.out" \
    || { cat "$SCRATCH/last.out" >&2; fail "compare $*: expected 'nothing comparable: $want'"; }
  ! grep -q "metrics compared" "$SCRATCH/last.out" || fail "compare $*: printed a verdict"
}
expect_nothing_comparable "OLD /dev/null holds no record" /dev/null "$B"
expect_nothing_comparable "NEW /dev/null holds no record" "$A" /dev/null
expect_nothing_comparable "NEW $G holds no ok record (2 records: 2 skipped)" "$A" "$G"
expect_nothing_comparable "no case id in common: OLD $A has 2 ok cases, NEW $O 2, none the same" "$A" "$O"
expect_nothing_comparable "no case id in common: OLD $A has 2 ok cases, NEW $O 2, none the same" "$A" "$O" --json

# An empty folder (or a results root holding several runs) is no run folder: bad input.
expect_rc 2 "$TPBENCH" compare "$SCRATCH/empty" "$B"
grep -qF "$SCRATCH/empty: no results.jsonl in this folder" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "an empty folder is not refused with the reason"; }
expect_rc 2 "$TPBENCH" compare "$A" "$SCRATCH"
grep -qF "$SCRATCH: no results.jsonl in this folder" "$SCRATCH/last.out" || fail "a results root is not refused"
echo "compare nothing comparable: ok"
