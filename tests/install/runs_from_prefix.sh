#!/usr/bin/env bash
# `cmake --install` into a scratch prefix, then the installed tpbench, run from a folder that
# is no source tree and with TPB_HOME unset, finds its data under PREFIX/share/tpbench
# (reference_engine/config/data_home.h): a scenario by name, its model preset, the report
# scripts and a qualification profile's scenarios. The records' reproduce command names the
# installed scenario file, so the data came from the prefix, not from the source tree the
# binary was built from (which it would also find).
# usage: runs_from_prefix.sh CMAKE BUILD_DIR SCRATCH
set -euo pipefail
CMAKE=$1
BUILD=$2
SCRATCH=$3
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH/elsewhere"
PREFIX=$SCRATCH/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

"$CMAKE" --install "$BUILD" --prefix "$PREFIX" >"$SCRATCH/install.log" 2>&1 || { cat "$SCRATCH/install.log" >&2; fail "cmake --install"; }
DATA=$PREFIX/share/tpbench
for f in bin/tpbench share/tpbench/scenarios/ci-smoke.json share/tpbench/scenarios/models/tiny-dsv3.json \
         share/tpbench/scenarios/qualify/cpu-smoke.json share/tpbench/scenarios/conformance/cpu-shm-allreduce.json \
         share/tpbench/baselines/cpu-ref/qualify-cpu-smoke.json share/tpbench/report/make_report.py \
         share/tpbench/schemas/record.schema.json share/tpbench/schemas/run.schema.json \
         share/tpbench/schemas/scenario.schema.json share/doc/tpbench/LICENSE; do
  [[ -e $PREFIX/$f ]] || fail "not installed: $f"
done
[[ -x $PREFIX/bin/tpbench ]] || fail "bin/tpbench is not executable"
[[ -z $(find "$DATA/report" -name '__pycache__' -o -name '*.pyc') ]] || fail "Python caches installed"

cd "$SCRATCH/elsewhere"
run() { env -u TPB_HOME "$PREFIX/bin/tpbench" "$@"; }

run list >"$SCRATCH/list.out" 2>&1 || { cat "$SCRATCH/list.out" >&2; fail "tpbench list"; }
grep -q "model presets ($DATA/scenarios/models)" "$SCRATCH/list.out" || { cat "$SCRATCH/list.out" >&2; fail "presets not read from the prefix"; }

set +e
run run ci-smoke --no-report --results-dir "$SCRATCH/results" >"$SCRATCH/run.out" 2>&1
rc=$?
set -e
[[ $rc -eq 0 ]] || { cat "$SCRATCH/run.out" >&2; fail "installed tpbench run ci-smoke: exit $rc"; }
runs=("$SCRATCH"/results/*/)
[[ ${#runs[@]} -eq 1 ]] || fail "expected one run folder"
python3 - "${runs[0]}" "$DATA" <<'PY'
import json, sys
run, data = sys.argv[1], sys.argv[2]
records = [json.loads(line) for line in open(f"{run}/results.jsonl")]
assert len(records) >= 2 and all(r["status"] == "ok" for r in records), [r["status"] for r in records]
want = f"tpbench run {data}/scenarios/ci-smoke.json --case "
for r in records:
    assert r["reproduce"].startswith(want), (r["reproduce"], want)
assert json.load(open(f"{run}/run.json"))["scenario"]["source"] == f"{data}/scenarios/ci-smoke.json"
PY

# The report scripts come from the prefix too (when matplotlib is there to run them).
if python3 -c 'import matplotlib' >/dev/null 2>&1; then
  run report "${runs[0]}" >"$SCRATCH/report.out" 2>&1 || { cat "$SCRATCH/report.out" >&2; fail "installed tpbench report"; }
  [[ -s ${runs[0]}/report.html ]] || fail "no report.html"
fi

# A qualification profile outside any tree names a scenario and a baseline by their paths
# relative to a tpbench tree (as the shipped profiles do): both resolve under the prefix. The
# rows' verdicts judge this machine (exit 0 or 1); a path that did not resolve is bad input (2).
cat >"$SCRATCH/elsewhere/profile.json" <<'JSON'
{"schema": 1, "name": "install-check", "device": "cpu",
 "baseline": "baselines/cpu-ref/qualify-cpu-smoke.json", "baseline_tolerance": 0.9,
 "probes": [{"probe": "allreduce", "scenario": "scenarios/qualify/cpu-smoke-allreduce.json",
             "max_latency_us": {"4096": 1000000, "1048576": 1000000}}]}
JSON
set +e
run qualify profile.json --out "$SCRATCH/qualify" >"$SCRATCH/qualify.out" 2>&1
rc=$?
set -e
[[ $rc -eq 0 || $rc -eq 1 ]] || { cat "$SCRATCH/qualify.out" >&2; fail "installed tpbench qualify: exit $rc"; }
python3 - "$SCRATCH/qualify" "$DATA" <<'PY'
import glob, json, sys
qualify, data = sys.argv[1], sys.argv[2]
(run_json,) = glob.glob(f"{qualify}/runs-allreduce/*/run.json")
source = json.load(open(run_json))["scenario"]["source"]
assert source == f"{data}/scenarios/qualify/cpu-smoke-allreduce.json", source
rows = json.load(open(f"{qualify}/qualify.json"))["rows"]
assert any(isinstance(r.get("baseline"), (int, float)) for r in rows), "the profile's baseline was not found"
PY
echo "installed under $PREFIX: tpbench ran ci-smoke from $SCRATCH/elsewhere with TPB_HOME unset"
