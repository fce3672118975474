# Issue 15, path 8: when two runs that should agree did not, the check said "digests differ"
# or named the worst logit, never where they parted. Now a failing tp_invariant,
# equal_across_allreduce or deterministic group has its two sides rerun at
# instrumentation=digests (records with role `localize`), and its verdict names the first
# collective where they part: layer, op, forward pass, the sampled differences. Here a
# test-only planted fault (TPB_TEST_PLANT_DIVERGENCE: the TP 2 engine's communicator returns
# a sum scaled by 1.0625 at one layer's MoE all_reduce) must be named at that layer, for two
# different layers; a clean run reruns nothing; --no-localize reruns nothing.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
unset TPB_TEST_PLANT_DIVERGENCE

# The CPU engine conformance scenario, at one instrumentation level: TP 1 and 2 (tp_invariant).
python3 - scenarios/conformance/cpu-engine-observer.json "$SCRATCH/tp.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] += "-localize"
s["sweep"]["instrumentation"] = ["off"]
s["measure"].update({"iterations": 2, "repetitions": 1})
s["checks"] = ["tp_invariant"]
json.dump(s, open(sys.argv[2], "w"))
PY

# $1: results root. The check's localization from run.json, one line: "<found> <layer> <site> | <sentence>".
localization() {
  python3 - "$(run_dir_of "$1")" <<'PY'
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
for group in run["summary"]["checks"]["tp_invariant"]:
    loc = group.get("localization")
    if loc:
        print(loc["found"], loc.get("layer"), loc.get("site"), "|", loc["sentence"])
PY
}

# 1. Clean: the check passes and nothing is rerun.
expect_rc 0 "$TPBENCH" run "$SCRATCH/tp.json" --no-report --results-dir "$SCRATCH/clean"
! grep -q '"role":"localize"' "$(run_dir_of "$SCRATCH/clean")/results.jsonl" || fail "a clean run reran cases"
! grep -q "^localize:" "$SCRATCH/last.out" || fail "a clean run printed a localization"

# 2. Planted at layer 1, then at layer 2 (tiny-dsv3: layer 0 dense, 1 and 2 MoE): each named.
for layer in 1 2; do
  TPB_TEST_PLANT_DIVERGENCE="layer=$layer,tp=2" expect_rc 1 "$TPBENCH" run "$SCRATCH/tp.json" --no-report \
    --results-dir "$SCRATCH/layer$layer"
  cat "$SCRATCH/last.out"
  grep -q "^localize: tp_invariant (decode tp1 .* vs decode tp2 .*): first divergence at layer $layer moe all_reduce" \
    "$SCRATCH/last.out" || fail "layer $layer: the terminal does not name layer $layer's moe all_reduce"
  line=$(localization "$SCRATCH/layer$layer")
  echo "run.json: $line"
  [[ "$line" == "True $layer layer $layer moe all_reduce | first divergence at layer $layer moe all_reduce"* ]] ||
    fail "layer $layer: run.json's localization is '$line'"
  # The collectives before it agree within the budget; there it parts by the planted factor.
  [[ "$line" == *"outputs rel-L2 0.0625 (budget 1e-05)"* ]] || fail "layer $layer: not the planted 1.0625 factor: $line"
  # The reruns are in results.jsonl at instrumentation digests, with role localize.
  python3 - "$(run_dir_of "$SCRATCH/layer$layer")/results.jsonl" <<'PY' || fail "layer $layer: the reruns are not recorded"
import json, sys
reruns = [r for r in map(json.loads, open(sys.argv[1])) if r.get("role") == "localize"]
assert len(reruns) == 2, len(reruns)
for r in reruns:
    assert r["status"] == "ok" and r["params"]["instrumentation"] == "digests" and r["case_id"].endswith(".digests"), r["case_id"]
    td = r["metrics"][0]["instrumentation"]["tensor_digests"]
    assert td["calls"] > 0 and td["entries"][0]["site"] == "embedding all_reduce", td["entries"][0]
assert sorted(r["params"]["tp"] for r in reruns) == [1, 2]
PY
  # The check's detail carries it too (JUnit and the report read the detail).
  grep -q "localized: first divergence at layer $layer" "$(run_dir_of "$SCRATCH/layer$layer")/run.json" ||
    fail "layer $layer: the check's detail does not carry the localization"
done

# 3. --no-localize: the check still fails, nothing is rerun.
TPB_TEST_PLANT_DIVERGENCE="layer=1,tp=2" expect_rc 1 "$TPBENCH" run "$SCRATCH/tp.json" --no-report --no-localize \
  --results-dir "$SCRATCH/nolocalize"
! grep -q '"role":"localize"' "$(run_dir_of "$SCRATCH/nolocalize")/results.jsonl" || fail "--no-localize reran cases"

# 4. A malformed plant is refused, naming the variable.
TPB_TEST_PLANT_DIVERGENCE="layer=9" expect_rc 1 "$TPBENCH" run "$SCRATCH/tp.json" --no-report --results-dir "$SCRATCH/bad"
grep -q "TPB_TEST_PLANT_DIVERGENCE: layer: expected 0..2, got '9'" "$(run_dir_of "$SCRATCH/bad")/results.jsonl" ||
  fail "a malformed TPB_TEST_PLANT_DIVERGENCE was not refused"
echo ok
