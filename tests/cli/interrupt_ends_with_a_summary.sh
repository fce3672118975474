# Issue 17, finding 10: SIGINT/SIGTERM ended the controller silently (exit 130/143) with no
# summary in run.json and no hint to resume. Now the first signal in the case loop stops the
# case in flight (its ranks are killed; it stays unrecorded), writes run.json's summary with
# `interrupted` {signal, case_cut_short, not_run, resume}, prints the resume command and exits
# 128 + the signal; nothing is left running; --resume then finishes the run, each case once.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
set -m  # background jobs get SIGINT delivered (a non-interactive shell starts them ignoring it)
for sig in INT TERM; do
  root="$SCRATCH/$sig"
  "$TPBENCH" run scenarios/ci-smoke.json --no-report --results-dir "$root" >"$SCRATCH/$sig.out" 2>&1 &
  pid=$!
  # Once a few cases have records, the signal lands in the case loop.
  for _ in $(seq 200); do
    f=$(compgen -G "$root/*/results.jsonl" | head -1 || true)
    [[ -n "$f" && $(wc -l <"$f") -ge 3 ]] && break
    sleep 0.05
  done
  kill -$sig "$pid"
  set +e; wait "$pid"; rc=$?; set -e
  want=$((128 + $(kill -l $sig)))
  [[ $rc -eq $want ]] || { cat "$SCRATCH/$sig.out"; fail "SIG$sig: exit $rc, expected $want"; }
  run=$(run_dir_of "$root")
  grep -q "^interrupted by .*Resume with: tpbench run --resume $run" "$SCRATCH/$sig.out" ||
    { cat "$SCRATCH/$sig.out"; fail "SIG$sig: no resume hint"; }
  python3 - "$run" <<'PY' || fail "SIG$sig: run.json's summary does not say interrupted"
import json, sys
s = json.load(open(sys.argv[1] + "/run.json"))["summary"]
i = s["interrupted"]
assert i and i["resume"].startswith("tpbench run --resume ") and i["not_run"] > 0, i
assert s["failed"] == 0, s  # cases not run are not failures
PY
  sleep 0.5
  if pgrep -f "tpbench worker" >/dev/null; then pgrep -af "tpbench worker"; fail "SIG$sig: rank workers left running"; fi
  # --resume completes it: every planned case exactly once.
  expect_rc 0 "$TPBENCH" run --resume "$run" --no-report
  python3 - "$run" <<'PY' || fail "SIG$sig: after --resume the run is not complete, each case once"
import json, sys
planned = [c["case_id"] for c in json.load(open(sys.argv[1] + "/run.json"))["cases"]]
ids = [json.loads(l)["case_id"] for l in open(sys.argv[1] + "/results.jsonl")]
assert sorted(ids) == sorted(planned), (len(ids), len(planned))
PY
done
echo ok
