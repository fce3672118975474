# Issue 17, finding 9: each failed `logits --tp 2` left a /tmp/tpbench-logits-<pid>/ folder and
# a 16 MiB /dev/shm segment. Now a failure removes both; its message keeps the ranks' stderr.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
mkdir -p "$SCRATCH/tmp"
echo '[[1, 2, 3]]' >"$SCRATCH/ids.json"
shm_before=$(ls /dev/shm | grep -c '^tpb' || true)
TMPDIR="$SCRATCH/tmp" TPB_TEST_FAIL_CASE=logits expect_rc 1 "$TPBENCH" logits --model tiny-dsv3 --tp 2 \
  --input-ids "$SCRATCH/ids.json" --out "$SCRATCH/logits.safetensors"
grep -q "planted failure of case logits" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "the ranks' error is not in the message"; }
[[ -z "$(ls -A "$SCRATCH/tmp")" ]] || { ls -la "$SCRATCH/tmp"; fail "a temporary folder was left"; }
shm_after=$(ls /dev/shm | grep -c '^tpb' || true)
[[ $shm_after -le $shm_before ]] || fail "shared memory left: $shm_before -> $shm_after segments"
echo ok
