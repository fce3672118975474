#!/usr/bin/env bash
# tpbench qualify on one GPU: the single-H200 profile validates and, on a machine without
# its GPU, stops at the hardware row before measuring anything: nothing ran (exit 3, issue
# 15: a profile that measured nothing is neither a pass nor a failed box); a copy whose
# shared-placement scenario sits under a latency probe (allreduce) is bad input (exit 2)
# naming the probe's JSON path, since shared placement times contention, not an interconnect.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
profile=scenarios/qualify/h200x1.json

# 1. As written, on a machine without a GPU: the hardware row fails and nothing is measured
#    (exit 3, nothing ran). Where GPUs are visible, a copy asking for more GPUs than any box
#    has takes the same path without running the 3-minute conformance probe.
if ! "$TPBENCH" list | grep -q '^  nccl' || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  expect_rc 3 "$TPBENCH" qualify "$profile" --out "$SCRATCH/as-written"
  want_gpus=1 found='0'
  out=$SCRATCH/as-written
else
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['gpus']=4096; json.dump(d, open(sys.argv[2],'w'))" \
    "$profile" "$SCRATCH/many-gpus.json"
  expect_rc 3 "$TPBENCH" qualify "$SCRATCH/many-gpus.json" --out "$SCRATCH/many-gpus"
  want_gpus=4096 found='[0-9]+'
  out=$SCRATCH/many-gpus
fi
grep -Eq "^hardware +gpus .*FAIL +profile needs $want_gpus GPU\(s\), found $found\$" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "no 'profile needs $want_gpus GPU(s), found $found' FAIL row"; }
grep -q '^qualify: NOTHING RAN (1 rows, 1 not passing)' "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "qualify measured something without the GPUs it needs"; }
grep -Eq "^nothing ran: profile needs $want_gpus GPU\(s\), found $found\$" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "no 'nothing ran: profile needs $want_gpus GPU(s)' line"; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['rows']; sys.exit(0 if d['verdict']=='NOTHING RAN' and d['nothing_ran'] and len(r)==1 and r[0]['probe']=='hardware' else 1)" \
  "$out/qualify.json" || fail "qualify.json does not hold the one failing hardware row and say that nothing ran"

# 2. The conformance probe turned into an allreduce latency probe: refused before anything
#    runs, with the probe's path and the reason.
python3 - "$profile" "$SCRATCH/shared-latency.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
(i,) = [i for i, p in enumerate(doc["probes"]) if p["probe"] == "conformance"]
doc["probes"][i]["probe"] = "allreduce"
doc["probes"][i]["max_latency_us"] = {"8192": 15}
json.dump(doc, open(sys.argv[2], "w"), indent=2)
open(sys.argv[2] + ".index", "w").write(str(i))
PY
index=$(cat "$SCRATCH/shared-latency.json.index")
expect_rc 2 "$TPBENCH" qualify "$SCRATCH/shared-latency.json" --out "$SCRATCH/shared-latency"
grep -qF "\$.probes[$index].scenario" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "the offending probe's path \$.probes[$index].scenario is not named"; }
grep -q "shared placement measures contention, not an interconnect" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "the reason is not given"; }
[[ ! -e "$SCRATCH/shared-latency/qualify.json" ]] || fail "a refused profile must not produce a verdict"

# 3. peer_bandwidth on a one-GPU profile: refused the same way.
python3 - "$profile" "$SCRATCH/peer-1gpu.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["probes"].append({"probe": "peer_bandwidth", "bytes": 268435456, "repetitions": 10, "min_GBps": 300})
json.dump(doc, open(sys.argv[2], "w"), indent=2)
PY
expect_rc 2 "$TPBENCH" qualify "$SCRATCH/peer-1gpu.json" --out "$SCRATCH/peer-1gpu"
grep -qF '$.probes[4]: peer_bandwidth needs 2 GPUs or more' "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "peer_bandwidth on one GPU not refused with its path"; }
# 4. A conformance probe end to end on the CPU: one PASS row per case (repeats included), no
#    timing, so no baseline is needed for the profile to pass.
cat > "$SCRATCH/conformance.json" <<'JSON'
{"schema": 1, "name": "conformance", "device": "cpu",
 "probes": [{"probe": "conformance", "scenario": "scenarios/qualify/cpu-smoke-engine.json"}]}
JSON
expect_rc 0 "$TPBENCH" qualify "$SCRATCH/conformance.json" --out "$SCRATCH/conformance"
python3 - "$SCRATCH/conformance/qualify.json" <<'PY' || { cat "$SCRATCH/last.out" >&2; fail "conformance rows are not one PASS per case"; }
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert [r["item"] for r in rows] == ["decode tp1 b1 s64 shm", "decode tp1 b1 s64 shm [repeat]",
                                     "decode tp2 b1 s64 shm", "decode tp2 b1 s64 shm [repeat]"], rows
for r in rows:
    assert r["probe"] == "conformance" and r["unit"] == "bool" and r["verdict"] == "PASS", r
    assert r["detail"].startswith("output verified by deterministic"), r
    assert "placement" in r["detail"], r
PY
echo "qualify shared: ok"
