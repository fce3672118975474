# One argument grammar for every subcommand (issue 18): --opt=VALUE everywhere, one error
# line format, tpbench --version, qualify profiles found by name, a scenario on stdin (and its
# resume), and `list --json` describing every check.
source "$(dirname "$0")/common.bash" "$@"

# --opt=VALUE is read as --opt VALUE by every subcommand that takes values.
expect_rc 0 "$TPBENCH" run ci-smoke --dry-run --results-dir="$SCRATCH/unused" --filter=tp=2
grep -q "selected: --filter tp=2" "$SCRATCH/last.out" || fail "run --filter=tp=2 was not read"
expect_rc 0 "$TPBENCH" plan --from-measured --total-gib=90 --avail-gib=20 --mem-fraction=0.8 --json
fixture=$SOURCE_DIR/tests/data/results_fixture/results.jsonl
expect_rc 0 "$TPBENCH" compare --latency-tol=0.1 --min-repetitions=3 "$fixture" "$fixture"
if python3 -c 'import matplotlib' 2>/dev/null; then
  mkdir -p "$SCRATCH/report-in"
  cp "$SOURCE_DIR"/tests/data/results_fixture/{results.jsonl,run.json} "$SCRATCH/report-in/"
  expect_rc 0 "$TPBENCH" report "$SCRATCH/report-in" --out="$SCRATCH/report-out"
  [[ -s $SCRATCH/report-out/report.html ]] || fail "report --out=DIR wrote nothing there"
fi

# A bad option: exit 2 and one line, `tpbench <cmd>: error: ...`, for every subcommand.
for cmd in run plan compare qualify report list logits mps version; do
  set +e
  "$TPBENCH" $cmd --no-such-option >"$SCRATCH/out" 2>"$SCRATCH/err"
  rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "$cmd --no-such-option exited $rc, expected 2"
  want="tpbench $cmd: error: unknown option '--no-such-option' (see tpbench $cmd --help)"
  [[ $(cat "$SCRATCH/err") == "$want" ]] || fail "$cmd: expected '$want', got '$(cat "$SCRATCH/err")'"
  [[ ! -s $SCRATCH/out ]] || fail "$cmd printed on stdout for a bad option"
done
expect_rc 2 "$TPBENCH" run --results-dir
grep -qxF "tpbench run: error: --results-dir needs a value (see tpbench run --help)" "$SCRATCH/last.out" \
  || fail "missing value: $(cat "$SCRATCH/last.out")"
expect_rc 2 "$TPBENCH" plan --json=yes
grep -q "^tpbench plan: error: --json is a switch and takes no value" "$SCRATCH/last.out" || fail "switch with a value"
expect_rc 2 "$TPBENCH" compare --alpha 0.1 --alpha=0.2 a b
grep -q "^tpbench compare: error: --alpha given twice" "$SCRATCH/last.out" || fail "option given twice"
# A message that named its subcommand itself does not name it twice.
expect_rc 2 "$TPBENCH" run --update-baselines
grep -qxF "tpbench run: error: --update-baselines needs --baselines DIR" "$SCRATCH/last.out" \
  || fail "prefix not stripped: $(cat "$SCRATCH/last.out")"
expect_rc 2 "$TPBENCH" no-such-subcommand
grep -qxF "tpbench: error: unknown subcommand 'no-such-subcommand' (see tpbench --help)" "$SCRATCH/last.out" \
  || fail "unknown subcommand: $(cat "$SCRATCH/last.out")"

# --version, -V and version say the same; --json is one object with the build's fields.
expect_rc 0 "$TPBENCH" --version
cp "$SCRATCH/last.out" "$SCRATCH/version.txt"
grep -Eq '^tpbench [0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]+|unknown)' "$SCRATCH/version.txt" || fail "no version line"
grep -Eq '^cuda: +(yes|no)' "$SCRATCH/version.txt" || fail "no cuda line"
grep -Eq '^nccl: +(yes|no)' "$SCRATCH/version.txt" || fail "no nccl line"
for form in -V version; do
  expect_rc 0 "$TPBENCH" $form
  cmp -s "$SCRATCH/last.out" "$SCRATCH/version.txt" || fail "tpbench $form differs from --version"
done
"$TPBENCH" --version --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
for key in ("version", "git_sha", "git_dirty", "build_type", "cxx_compiler", "cuda", "nccl", "nccl_version"):
    assert key in v, key
assert isinstance(v["git_dirty"], bool) and isinstance(v["cuda"], bool)
' || fail "version --json"

# A qualification profile by name, from a folder with no scenarios/ in it (the source tree is
# found as run finds it); --json prints qualify.json's content and nothing else on stdout.
mkdir -p "$SCRATCH/elsewhere"
set +e
(cd "$SCRATCH/elsewhere" && "$TPBENCH" qualify cpu-smoke --out="$SCRATCH/qualify" --json \
  >"$SCRATCH/qualify.stdout" 2>"$SCRATCH/qualify.stderr")
rc=$?
set -e
# 1 is a threshold missed on a loaded machine; not finding the profile would be 2.
[[ $rc -eq 0 || $rc -eq 1 ]] || { cat "$SCRATCH/qualify.stderr" >&2; fail "qualify cpu-smoke exited $rc"; }
cmp -s "$SCRATCH/qualify.stdout" "$SCRATCH/qualify/qualify.json" || fail "qualify --json is not qualify.json"
grep -q "^qualify: " "$SCRATCH/qualify.stderr" || fail "the table did not go to stderr"

# A scenario on stdin: its source reads <stdin>, run --json prints run.json's summary, and
# --resume of the run needs no stdin (run.json keeps the document).
scenario() {
  python3 -c 'import json; print(json.dumps({"schema": 1, "name": "stdin-smoke", "workload": "allreduce",
    "device": "cpu", "sweep": {"tp": [1, 2], "allreduce": ["shm"], "message_bytes": [1028, 4096]},
    "measure": {"warmup": 1, "iterations": 2}, "checks": ["matches_reference"]}))'
}
set +e
scenario | "$TPBENCH" run - --no-report --results-dir "$SCRATCH/stdin" --json >"$SCRATCH/run.stdout" 2>"$SCRATCH/run.stderr"
rc=$?
set -e
[[ $rc -eq 0 ]] || { cat "$SCRATCH/run.stderr" >&2; fail "run - exited $rc"; }
run=$(run_dir_of "$SCRATCH/stdin")
python3 - "$SCRATCH/run.stdout" "$run" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
run_json = json.load(open(sys.argv[2] + "/run.json"))
assert out.pop("run_dir") == sys.argv[2], "run_dir"
assert out == run_json["summary"], (out, run_json["summary"])
assert out["ok"] == 4 and out["exit_code"] == 0, out
assert run_json["scenario"]["source"] == "<stdin>", run_json["scenario"]["source"]
PY
grep -q "^cases: 4 ok" "$SCRATCH/run.stderr" || fail "run --json: the human summary is not on stderr"
head -n 2 "$run/results.jsonl" >"$SCRATCH/head" && mv "$SCRATCH/head" "$run/results.jsonl"
expect_rc 0 "$TPBENCH" run --resume "$run" --no-report </dev/null
grep -q "cases: 4 ok.*(2 resumed" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "resume of a stdin run"; }
[[ $(wc -l <"$run/results.jsonl") -eq 4 ]] || fail "resume did not complete the run"
# Bad JSON on stdin is named as <stdin>:line:column.
expect_rc 2 bash -c "printf '{\"schema\": 1,\n' | '$TPBENCH' run - --no-report --results-dir '$SCRATCH/bad'"
grep -q "^<stdin>:2:1: not valid JSON" "$SCRATCH/last.out" || fail "stdin syntax error not placed"
grep -qxF "tpbench run: error: 1 problem(s) in the scenario; nothing was run" "$SCRATCH/last.out" || fail "problem count"

# `list --json`: every check with a description.
"$TPBENCH" list --json | python3 -c '
import json, sys
checks = json.load(sys.stdin)["checks"]
assert len(checks) >= 7, checks
for c in checks:
    assert c["name"] and c["description"].strip(), c
' || fail "list --json"
expect_rc 0 "$TPBENCH" list
grep -Eq '^  deterministic +the same case run twice' "$SCRATCH/last.out" || fail "list does not describe the checks"
echo "one CLI grammar: ok"
