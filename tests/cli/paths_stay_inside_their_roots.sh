# Issue 17, finding 3: `"name": "../../escaped-baseline"` with --baselines bl --update-baselines
# wrote escaped-baseline.jsonl and its provenance outside bl/, exit 0; a preset containing
# "../" read any .json file. Now names that become file names are a safe character set,
# refused at validation (exit 2, the file and the JSON path, nothing written), and the
# baseline file is checked to lie under --baselines.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
mkdir -p "$SCRATCH/work/bl"

# 1. A scenario name that climbs out of the baselines folder.
python3 - scenarios/ci-smoke.json "$SCRATCH/escape.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] = "../../escaped-baseline"
json.dump(s, open(sys.argv[2], "w"))
PY
( cd "$SCRATCH/work" && expect_rc 2 "$TPBENCH" run "$SCRATCH/escape.json" --no-report --baselines bl --update-baselines \
    --force-dirty-baseline "cli test" --results-dir runs )
grep -q "escape.json: \$.name: expected a name of letters, digits, '.', '_' and '-'" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "the name is not refused with its path"; }
[[ -z "$(find "$SCRATCH" -name 'escaped-baseline*')" ]] || fail "a baseline escaped"
[[ ! -e "$SCRATCH/work/runs" ]] || fail "a refused scenario wrote a run folder"

# 2. Names with a separator, a NUL-like control byte, a leading dot, 200 characters.
for name in "a/b" $'tab\there' ".hidden" "$(printf 'x%.0s' $(seq 200))"; do
  python3 - scenarios/ci-smoke.json "$SCRATCH/named.json" "$name" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] = sys.argv[3]
json.dump(s, open(sys.argv[2], "w"))
PY
  expect_rc 2 "$TPBENCH" run "$SCRATCH/named.json" --dry-run
  grep -q "named.json: \$.name: expected a name of letters" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "name '$name' accepted"; }
done

# 3. A preset that climbs out of scenarios/models (to a .json that exists: the scenario itself).
python3 - scenarios/conformance/cpu-engine-observer.json "$SCRATCH/preset.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["model"]["preset"] = "../ci-smoke"
json.dump(s, open(sys.argv[2], "w"))
PY
expect_rc 2 "$TPBENCH" run "$SCRATCH/preset.json" --dry-run
grep -q "preset.json: \$.model.preset: expected a preset name" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "preset '../ci-smoke' accepted"; }
expect_rc 2 "$TPBENCH" plan --model ../ci-smoke --tp 1
grep -q "neither a path nor a preset name" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "plan read '../ci-smoke'"; }

# 4. A safe name still runs and stores its baseline where it belongs.
( cd "$SCRATCH/work" && expect_rc 0 "$TPBENCH" run "$SOURCE_DIR/scenarios/conformance/cpu-shm-allreduce.json" --no-report \
    --baselines bl --update-baselines --force-dirty-baseline "cli test" --results-dir runs )
[[ -s "$SCRATCH/work/bl/cpu-ref/cpu-shm-allreduce.jsonl" ]] || { ls -R "$SCRATCH/work/bl"; fail "the baseline is not under bl/cpu-ref/"; }
echo ok
