#!/usr/bin/env bash
# Issue 15, requirement 4: one record held two algbw values for one case, the allreduce
# workload's metrics[r].algbw_GBps (from the mean of the rank's samples) and the runner's
# throughput.algbw_GBps (from the p50). Now the workload says what a step moves (work) and the
# harness derives throughput once (suite/measure/measure.h), as nccl-tests does: algbw = bytes / the
# MEAN time (the record's merged latency.mean), busbw = algbw x 2(n-1)/n. This runs a reduced
# ci-smoke sweep over shm at TP 1, 2 and 4 and checks, on every record: exactly one algbw and
# one busbw in the whole JSON line, with basis "mean", equal to those formulas; and the report's
# reader (report/results_io.py) returns that same value.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"

python3 - scenarios/ci-smoke.json "$SCRATCH/smoke.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] += "-one-algbw"
s["sweep"].update({"tp": [1, 2, 4], "dtype": ["bf16"], "message_bytes": [65536]})
s["measure"].update({"iterations": 5, "repetitions": 2})
s["checks"] = ["matches_reference"]
s.pop("control", None)
json.dump(s, open(sys.argv[2], "w"))
PY

expect_rc 0 "$TPBENCH" run "$SCRATCH/smoke.json" --no-report --results-dir "$SCRATCH/runs"
run=$(run_dir_of "$SCRATCH/runs")

python3 - "$run/results.jsonl" "$SOURCE_DIR/report" <<'PY' || fail "a record does not hold exactly one algbw/busbw from the mean"
import json, math, sys
sys.path.insert(0, sys.argv[2])
import results_io as rio
lines = [l for l in open(sys.argv[1]) if l.strip()]
ok = 0
for line in lines:
    r = json.loads(line)
    if r["status"] != "ok":
        continue
    ok += 1
    # Exactly one of each in the whole record: no per-rank copy beside the throughput.
    assert line.count('"algbw_GBps"') == 1, (r["label"], line.count('"algbw_GBps"'))
    assert line.count('"busbw_GBps"') == 1, (r["label"], line.count('"busbw_GBps"'))
    assert all("algbw_GBps" not in m and "busbw_GBps" not in m for m in r["metrics"]), r["metrics"]
    t, lat = r["throughput"], r["latency"]
    n, nbytes = r["params"]["tp"], r["params"]["message_bytes"]
    assert t["basis"] == "mean", t
    algbw = nbytes / (lat["mean"] * 1e-6) / 1e9
    busbw = algbw * (2 * (n - 1) / n if n > 1 else 0.0)
    assert math.isclose(t["algbw_GBps"], algbw, rel_tol=1e-12), (t, algbw)
    assert math.isclose(t["busbw_GBps"], busbw, rel_tol=1e-12, abs_tol=1e-300), (t, busbw)
    # The report reads the same value.
    assert rio.metric(r, "algbw_GBps") == t["algbw_GBps"] and rio.metric(r, "busbw_GBps") == t["busbw_GBps"]
    print(f'{r["label"]}: algbw {t["algbw_GBps"]:.4g} GB/s = {nbytes} B / mean {lat["mean"]:.4g} us '
          f'(p50 {lat["p50"]:.4g} us), busbw {t["busbw_GBps"]:.4g} GB/s')
assert ok == 3, f"expected 3 ok records (TP 1, 2, 4), got {ok}"
PY
echo ok
