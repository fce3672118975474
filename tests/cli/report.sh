# `tpbench report RESULTS_DIR`: finds report/make_report.py from any working directory,
# writes every file, and passes the script's exit status on; a malformed results line and a
# missing RESULTS_DIR are exit 2 with a clear message, a missing interpreter and a missing
# matplotlib exit 3 (the report cannot be made on this machine, as tpbench's "nothing ran").
source "$(dirname "$0")/common.bash" "$@"

fixture() {
  rm -rf "$1" && mkdir -p "$1"
  cp "$SOURCE_DIR/tests/data/results_fixture/results.jsonl" \
     "$SOURCE_DIR/tests/data/results_fixture/run.json" "$1/"
}

# From outside the source tree: the script is found through the build's source dir.
fixture "$SCRATCH/ok"
(cd "$SCRATCH" && expect_rc 0 "$TPBENCH" report "$SCRATCH/ok")
for f in report.html summary.md allreduce.png decode_latency.png prefill_latency.png \
         throughput_latency.png prefill_ttft.png \
         speedup_heatmap.png memory.png kv_tokens.png baseline.png; do
  [[ -s "$SCRATCH/ok/$f" ]] || fail "report did not write $f"
done

# Through $TPB_HOME: a copy of report/ elsewhere is the one that runs.
mkdir -p "$SCRATCH/home/report"
cp "$SOURCE_DIR"/report/*.py "$SCRATCH/home/report/"
sed -i 's/^def main(argv):/def main(argv):\n    print("TPB_HOME copy")/' "$SCRATCH/home/report/make_report.py"
fixture "$SCRATCH/home-run"
(cd "$SCRATCH" && TPB_HOME="$SCRATCH/home" expect_rc 0 "$TPBENCH" report "$SCRATCH/home-run")
grep -q "TPB_HOME copy" "$SCRATCH/last.out" || fail "TPB_HOME/report was not used"

expect_rc 2 "$TPBENCH" report
grep -q "missing RESULTS_DIR" "$SCRATCH/last.out" || fail "no usage message"

fixture "$SCRATCH/bad"
sed -i '7s/.*/{"case_id": "x", "status": /' "$SCRATCH/bad/results.jsonl"
expect_rc 2 "$TPBENCH" report "$SCRATCH/bad"
grep -q "results.jsonl:7: not valid JSON" "$SCRATCH/last.out" || fail "malformed line not named"
[[ ! -e "$SCRATCH/bad/report.html" ]] || fail "report written from a malformed file"

TPB_PYTHON="$SCRATCH/no-such-python" expect_rc 3 "$TPBENCH" report "$SCRATCH/ok"
grep -q "cannot run '$SCRATCH/no-such-python'" "$SCRATCH/last.out" || fail "missing python not reported"

# An interpreter without site-packages has no matplotlib.
printf '#!/bin/sh\nexec python3 -S "$@"\n' >"$SCRATCH/python-bare"
chmod +x "$SCRATCH/python-bare"
if ! "$SCRATCH/python-bare" -c "import matplotlib" 2>/dev/null; then
  TPB_PYTHON="$SCRATCH/python-bare" expect_rc 3 "$TPBENCH" report "$SCRATCH/ok"
  grep -q "matplotlib is not installed" "$SCRATCH/last.out" || fail "missing matplotlib not reported"
fi
echo "report CLI ok"
