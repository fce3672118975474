# Issue 17, finding 9: each failed `logits --tp 2` left a /tmp/tpbench-logits-<pid>/ folder and
# a 16 MiB /dev/shm segment. Now a failure removes both; its message keeps the ranks' stderr.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
mkdir -p "$SCRATCH/tmp"
echo '[[1, 2, 3]]' >"$SCRATCH/ids.json"
# In the background for its pid: the shared memory of its groups is named tpb<pid>-g<n>-...,
# so that other tests' segments, made meanwhile, do not count.
TMPDIR="$SCRATCH/tmp" TPB_TEST_FAIL_CASE=logits TPB_TEST_MARK=$MARK "$TPBENCH" logits --model tiny-dsv3 --tp 2 \
  --input-ids "$SCRATCH/ids.json" --out "$SCRATCH/logits.safetensors" >"$SCRATCH/last.out" 2>&1 &
pid=$!
set +e; wait "$pid"; rc=$?; set -e
[[ $rc -eq 1 ]] || { cat "$SCRATCH/last.out"; fail "expected exit 1, got $rc"; }
grep -q "planted failure of case logits" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "the ranks' error is not in the message"; }
[[ -z "$(ls -A "$SCRATCH/tmp")" ]] || { ls -la "$SCRATCH/tmp"; fail "a temporary folder was left"; }
expect_nothing_left "$pid" "failed logits"
echo ok
