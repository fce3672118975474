# Issue 37, finding 2: a 2 x 10^7-case sweep with --dry-run reached 7 GB in 5 s and ended in
# bad_alloc (exit 1). Now a sweep of more than 100000 cases (the axes' product times the engine
# modes, suite/scenario/sweep.h kMaxSweepCases) is refused before it is built: exit 2, the file, the
# count and the axes that multiply to it, within seconds and without the memory.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
python3 - "$SCRATCH/huge.json" "$SCRATCH/edge.json" <<'PY'
import json, sys
base = {"schema": 1, "name": "huge", "workload": "engine", "model": {"preset": "tiny-dsv3"}, "device": "cpu",
        "mode": ["decode", "prefill"]}
huge = dict(base, sweep={"batch_size": list(range(1, 10001)), "seq_len": list(range(1, 1001))})
json.dump(huge, open(sys.argv[1], "w"))
edge = dict(base, name="edge", sweep={"batch_size": list(range(1, 501)), "seq_len": list(range(1, 101))})
json.dump(edge, open(sys.argv[2], "w"))  # 500 x 100 x 2 modes = 100000: at the limit
PY
start=$SECONDS
expect_rc 2 timeout 60 "$TPBENCH" run "$SCRATCH/huge.json" --dry-run
grep -q 'huge.json: \$.sweep: 20000000 cases (2 modes x batch_size 10000 x seq_len 1000); expected at most 100000' \
  "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "the sweep's size is not refused with its count and axes"; }
(( SECONDS - start < 30 )) || fail "refusing took $((SECONDS - start)) s"
expect_rc 0 timeout 120 "$TPBENCH" run "$SCRATCH/edge.json" --dry-run
grep -q "100000 cases" "$SCRATCH/last.out" || { tail -3 "$SCRATCH/last.out"; fail "the sweep at the limit did not expand"; }
echo ok
