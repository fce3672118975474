#!/usr/bin/env bash
# tpbench qualify: a profile whose threshold the machine cannot meet fails (exit 1, FAIL
# row naming the threshold); a malformed profile is bad input (exit 2, every problem named).
set -u
tpbench=$1 scratch=$2
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "FAIL: $*"; exit 1; }

# 1. Tightened beyond what any machine does: 1e9 GB/s of memcpy.
cat > "$scratch/tight.json" <<'JSON'
{"schema": 1, "name": "tight", "device": "cpu",
 "probes": [{"probe": "memory_bandwidth", "bytes": 1048576, "repetitions": 2, "min_GBps": 1e9}]}
JSON
"$tpbench" qualify "$scratch/tight.json" --out "$scratch/tight" > "$scratch/tight.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "tightened profile: exit $rc, expected 1"
grep -q "FAIL" "$scratch/tight.out" || fail "no FAIL row"
grep -q "threshold >= 1e+09 GB/s not met" "$scratch/tight.out" || fail "the failing threshold is not named"
python3 -c "import json,sys; d=json.load(open('$scratch/tight/qualify.json')); sys.exit(0 if d['verdict']=='FAIL' else 1)" \
  || fail "qualify.json verdict is not FAIL"
grep -q "<failure" "$scratch/tight/qualify.junit.xml" || fail "JUnit has no failure"

# 2. Recorded baseline, then compared: passes; a missing baseline never passes.
cat > "$scratch/base.json" <<JSON
{"schema": 1, "name": "base", "device": "cpu", "baseline": "$scratch/baseline.json", "baseline_tolerance": 0.95,
 "probes": [{"probe": "memory_bandwidth", "bytes": 16777216, "repetitions": 5, "min_GBps": 0.01}]}
JSON
"$tpbench" qualify "$scratch/base.json" --out "$scratch/b0" > "$scratch/b0.out" 2>&1
[ $? -eq 1 ] || fail "no stored baseline must not pass"
grep -q "NO-BASELINE" "$scratch/b0.out" || fail "missing baseline not reported"
"$tpbench" qualify "$scratch/base.json" --out "$scratch/b1" --update-baseline > /dev/null 2>&1
[ -f "$scratch/baseline.json" ] || fail "--update-baseline wrote nothing"
"$tpbench" qualify "$scratch/base.json" --out "$scratch/b2" > "$scratch/b2.out" 2>&1
[ $? -eq 0 ] || { cat "$scratch/b2.out"; fail "against its own baseline the profile must pass"; }

# 3. Malformed: three problems, all reported, exit 2.
cat > "$scratch/bad.json" <<'JSON'
{"schema": 1, "device": "tpu", "colour": "red",
 "probes": [{"probe": "warp_drive"}]}
JSON
"$tpbench" qualify "$scratch/bad.json" --out "$scratch/bad" > "$scratch/bad.out" 2>&1
[ $? -eq 2 ] || fail "malformed profile: expected exit 2"
for what in '\$.device' '\$.colour' '\$.probes\[0\].probe'; do
  grep -q "$what" "$scratch/bad.out" || fail "problem $what not reported"
done
echo "qualify thresholds: ok"
