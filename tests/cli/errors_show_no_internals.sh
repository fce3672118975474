# Issue 37, finding 10: errors showed internals: "[false at ../suite/results.cpp:184]",
# "[json.exception.parse_error.101]", a 5,000-character value echoed whole. Now a message names
# the input (file, JSON path or option) and the rule; a quoted value is cut with its length
# said; no source file, assertion or library text. Each hostile input here: exit 2, the
# expected words, and none of the internals, on lines of at most 400 characters.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
long=$(printf 'L%.0s' $(seq 5000))

# refused WHAT WORDS CMD...: exit 2; stderr holds WORDS (fixed text) and nothing internal.
refused() {
  local what=$1 words=$2; shift 2
  expect_rc 2 "$@"
  grep -qF -- "$words" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "$what: expected '$words'"; }
  ! grep -Eq 'json\.exception|\.(cpp|h|cu):[0-9]|\[[^]]* at [^]]*\]|filesystem error|what\(\)|std::' "$SCRATCH/last.out" ||
    { cat "$SCRATCH/last.out"; fail "$what: the message shows internals"; }
  local longest
  longest=$(awk '{ if (length($0) > n) n = length($0) } END { print n + 0 }' "$SCRATCH/last.out")
  (( longest <= 400 )) || { cut -c1-300 "$SCRATCH/last.out"; fail "$what: a line of $longest characters"; }
}

# edit SRC DEST PYTHON: DEST is SRC's JSON with `doc` changed by PYTHON (`long` holds 5,000 L).
edit() {
  python3 - "$1" "$2" "$3" "$long" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
long = sys.argv[4]
exec(sys.argv[3])
json.dump(doc, open(sys.argv[2], "w"))
PY
}

# Bad JSON: the file, line:column and the parser's complaint in tpbench's words.
printf '{"schema": 1, "name": x}' >"$SCRATCH/syntax.json"
refused "bad JSON" "$SCRATCH/syntax.json:1:23: not valid JSON: invalid literal; last read: '\"name\": x'" \
  "$TPBENCH" run "$SCRATCH/syntax.json" --dry-run
printf '{"schema": 1, "name": "%s' "$long" >"$SCRATCH/open-string.json"
refused "an unterminated 5,000-character string" "not valid JSON: invalid string: missing closing quote; last read: '\"LLLL" \
  "$TPBENCH" run "$SCRATCH/open-string.json" --dry-run
printf '{"schema": 1e400}' >"$SCRATCH/huge-number.json"
refused "1e400" "$SCRATCH/huge-number.json: not valid JSON: the number 1e400 is too large for a double" \
  "$TPBENCH" run "$SCRATCH/huge-number.json" --dry-run

# 5,000-character values in scenario fields: cut, their length said.
edit scenarios/ci-smoke.json "$SCRATCH/name.json" 'doc["name"] = long'
refused "a long name" '$.name: expected a name of letters' "$TPBENCH" run "$SCRATCH/name.json" --dry-run
grep -qF '... (5002 characters)' "$SCRATCH/last.out" || fail "a long name: its length is not said"
edit scenarios/ci-smoke.json "$SCRATCH/backend.json" 'doc["sweep"]["allreduce"] = [long]'
refused "a long backend" '$.sweep.allreduce[0]: expected an allreduce backend' "$TPBENCH" run "$SCRATCH/backend.json" --dry-run
edit scenarios/quickstart-cpu.json "$SCRATCH/weights.json" 'doc["model"]["weights"] = long'
refused "a long weights path" '$.model.weights: expected "synthetic" or an existing checkpoint folder' \
  "$TPBENCH" run "$SCRATCH/weights.json" --dry-run
edit scenarios/quickstart-cpu.json "$SCRATCH/override.json" 'doc["model"]["overrides"] = {"num_hidden_layers": long}'
refused "a long override" '$.model.overrides.num_hidden_layers: expected an integer, got "LLLL' \
  "$TPBENCH" run "$SCRATCH/override.json" --dry-run

# A model config: a long value, then bad JSON.
edit scenarios/models/tiny-dsv3.json "$SCRATCH/config.json" 'doc["scoring_func"] = long'
refused "a long config value" 'scoring_func: expected "sigmoid", got "LLLL' "$TPBENCH" plan --model "$SCRATCH/config.json" --tp 1 --gpu H200
printf '{"hidden_size": 64,' >"$SCRATCH/cut-config.json"
refused "a config cut short" "$SCRATCH/cut-config.json:1:20: not valid JSON: unexpected end of input" \
  "$TPBENCH" plan --model "$SCRATCH/cut-config.json" --tp 1 --gpu H200
refused "bad --overrides" "--overrides: not valid JSON: invalid literal" \
  "$TPBENCH" plan --model tiny-dsv3 --tp 1 --gpu H200 --overrides '{"num_hidden_layers": x}'

# compare: a results file with a bad line, and a record field of the wrong type.
expect_rc 0 "$TPBENCH" run scenarios/ci-smoke.json --no-report --results-dir "$SCRATCH/runs"
run=$(run_dir_of "$SCRATCH/runs")
{ head -1 "$run/results.jsonl"; echo '{"case_id": "x", "status": '; } >"$SCRATCH/bad-line.jsonl"
refused "compare, a bad line" "$SCRATCH/bad-line.jsonl:2: not valid JSON (unexpected end of input" \
  "$TPBENCH" compare "$run" "$SCRATCH/bad-line.jsonl"

# --resume of a damaged run.json: the path of the damage, not a type error.
cp -r "$run" "$SCRATCH/damaged"
edit "$run/run.json" "$SCRATCH/damaged/run.json" 'doc["scenario"] = long'
refused "--resume, scenario a string" "$SCRATCH/damaged/run.json: \$.scenario: expected an object" \
  "$TPBENCH" run --resume "$SCRATCH/damaged" --no-report
edit "$run/run.json" "$SCRATCH/damaged/run.json" 'doc["launcher"]["launcher_args"] = "x"'
refused "--resume, launcher_args a string" "$SCRATCH/damaged/run.json: \$.launcher.launcher_args: expected a list of strings" \
  "$TPBENCH" run --resume "$SCRATCH/damaged" --no-report
edit "$run/run.json" "$SCRATCH/damaged/run.json" 'del doc["scenario"]["document"]'
refused "--resume, no document" "$SCRATCH/damaged/run.json: \$.scenario.document: expected an object" \
  "$TPBENCH" run --resume "$SCRATCH/damaged" --no-report

# Long command-line values.
refused "a long unknown option" "unknown option '--LLLL" "$TPBENCH" run "--$long"
refused "a long scenario name" "scenario 'LLLL" "$TPBENCH" run "$long" --dry-run
refused "a long number" "--cpu-mem-gib: expected a number of GiB" "$TPBENCH" run ci-smoke --cpu-mem-gib "$long"
echo ok
