# Issue 16, part 6: test-only code (the TPB_TEST_* fault hooks, TPB_PRETEND_DIRTY, the probe
# workload) shipped in the binary users measure with. Now it is built only where tests run:
# -DTPB_TEST_HOOKS=ON in the ci and cuda presets, off in default and cpu, where a hook
# variable is refused by name (tpb/test_hooks.h) and the tests are not built. This checks the
# presets and that every hook read goes through tpb::test_hook.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
python3 - CMakePresets.json <<'PY' || fail "the presets do not keep the test hooks to the test builds"
import json, sys
presets = {p["name"]: p for p in json.load(open(sys.argv[1]))["configurePresets"]}
def hooks(name):
    p, value = presets[name], None
    while p is not None:
        value = p.get("cacheVariables", {}).get("TPB_TEST_HOOKS", value) if value is None else value
        p = presets.get(p.get("inherits")) if p.get("inherits") else None
    return value
assert hooks("ci") == "ON" and hooks("cuda") == "ON", (hooks("ci"), hooks("cuda"))
assert hooks("default") in (None, "OFF") and hooks("cpu") in (None, "OFF"), (hooks("default"), hooks("cpu"))
PY
# Every TPB_TEST_* or TPB_PRETEND_DIRTY read is a test_hook() call, never a bare getenv.
if grep -rnE 'getenv\("(TPB_TEST_[A-Z_]+|TPB_PRETEND_DIRTY)"' suite reference_engine kernels bench --include=*.cpp --include=*.h --include=*.cu; then
  fail "a test hook is read with getenv, not tpb::test_hook"
fi
grep -q '^#if TPB_TEST_HOOKS' suite/workloads/workload.cpp || fail "the probe workload is not limited to test builds"
# This (a test build) has the hooks: a planted fallback takes effect.
TPB_TEST_PLANT_FALLBACK=1 expect_rc 0 "$TPBENCH" list
grep -q "planted" "$SCRATCH/last.out" || fail "a test build does not list the planted backend"
echo ok
