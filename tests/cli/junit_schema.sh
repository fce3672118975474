# Issue 18: tpbench's JUnit must be read by Jenkins (the JUnit plugin, and the xUnit plugin,
# which validates a file against its junit-10 schema and drops it when it fails) and GitLab.
# Every file `tpbench run --junit` and `tpbench qualify` write here (passing, failing,
# skipped and nothing-ran) is checked against tests/data/junit/junit-subset.xsd, the subset
# those parsers accept, by tests/support/junit_validate.py; the files of
# tests/data/junit/rejected/ (the output before issue 18 among them) must fail it. Then what
# the XML says is compared with what tpbench recorded: a case's suite properties are numbers
# of its record in results.jsonl, a qualification row's testcase time is its wall_s.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
export CUDA_VISIBLE_DEVICES=  # memory-fraction then runs nothing on a GPU machine too
python3 -c 'import lxml' 2>/dev/null || fail "python3 cannot import lxml: apt-get install python3-lxml (scripts/setup.sh does)"
validate() { python3 tests/support/junit_validate.py tests/data/junit/junit-subset.xsd "$@"; }

# 1. The validation can fail: each rejected file fails, for its reason.
declare -A reason=(
  [before-issue-18]="Element 'testsuites', attribute 'skipped': The attribute 'skipped' is not allowed."
  [testcase-properties]="Element 'properties': This element is not expected."
  [counts-disagree]="testsuite 'allreduce tp1 1028B bf16 shm' says failures=1, holds 0"
)
for file in tests/data/junit/rejected/*.xml; do
  name=$(basename "$file" .xml)
  [[ -n ${reason[$name]:-} ]] || fail "$file: no expected reason in this test"
  expect_rc 1 python3 tests/support/junit_validate.py tests/data/junit/junit-subset.xsd "$file"
  grep -qF "${reason[$name]}" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "$file rejected, not for: ${reason[$name]}"; }
done
expect_rc 1 python3 tests/support/junit_validate.py tests/data/junit/junit-subset.xsd tests/data/junit/rejected/before-issue-18.xml
grep -qF "The value 'ci-smoke.allreduce tp1 1028B bf16 shm [da2c6f9a03edbce3]' is not accepted by the pattern" \
  "$SCRATCH/last.out" || fail "a classname with spaces and brackets is not rejected"

# 2. What tpbench writes. ci-smoke: every case passes.
expect_rc 0 "$TPBENCH" run scenarios/ci-smoke.json --no-report --results-dir "$SCRATCH/smoke" --junit "$SCRATCH/smoke.xml"
# A failing case (its timeout), a skipped one (nccl on the CPU), a check that applies to no case.
cat >"$SCRATCH/mixed.json" <<'JSON'
{"schema": 1, "name": "junit-mixed", "workload": "allreduce", "device": "auto",
 "sweep": {"tp": [2], "allreduce": ["shm", "nccl"], "message_bytes": [4, 8388608]},
 "measure": {"warmup": 0, "iterations": 5000, "timeout_s": 0.3},
 "checks": ["matches_reference", "tp_invariant"]}
JSON
expect_rc 1 "$TPBENCH" run "$SCRATCH/mixed.json" --no-report --results-dir "$SCRATCH/mixed" --junit "$SCRATCH/mixed.xml"
# Nothing ran: a GPU scenario with no GPU visible.
expect_rc 3 "$TPBENCH" run memory-fraction --no-report --results-dir "$SCRATCH/none" --junit "$SCRATCH/none.xml"
# qualify: the CI profile (its timings may miss their baseline on a loaded runner: 0 or 1), a
# threshold no machine meets (a failure row), and a GPU profile with no GPU (nothing ran).
set +e
"$TPBENCH" qualify scenarios/qualify/cpu-smoke.json --out "$SCRATCH/q-smoke" >"$SCRATCH/q-smoke.out" 2>&1
rc=$?
set -e
[[ $rc -le 1 ]] || { cat "$SCRATCH/q-smoke.out" >&2; fail "qualify cpu-smoke exited $rc"; }
cat >"$SCRATCH/tight.json" <<'JSON'
{"schema": 1, "name": "tight", "device": "cpu",
 "probes": [{"probe": "memory_bandwidth", "bytes": 1048576, "repetitions": 2, "min_GBps": 1e9}]}
JSON
expect_rc 1 "$TPBENCH" qualify "$SCRATCH/tight.json" --out "$SCRATCH/q-tight"
expect_rc 3 "$TPBENCH" qualify scenarios/qualify/h200x1.json --out "$SCRATCH/q-none"

xmls=("$SCRATCH"/{smoke,mixed,none}.xml "$SCRATCH"/q-{smoke,tight,none}/qualify.junit.xml)
validate "${xmls[@]}" || fail "tpbench's JUnit does not satisfy tests/data/junit/junit-subset.xsd"
python3 - "${xmls[@]:0:3}" <<'PY' || fail "the JUnit files do not hold failure, skipped and nothing-ran testcases"
import sys
from lxml import etree
smoke, mixed, none = (etree.parse(p) for p in sys.argv[1:])
assert not smoke.xpath("//failure|//error"), "ci-smoke: every case passes"
assert mixed.xpath("//testcase[@name='run']/failure") and mixed.xpath("//testcase[@name='run']/skipped")
assert mixed.xpath("//testcase[@classname='tpbench.junit-mixed' and @name='tp_invariant']/skipped")
assert none.xpath("(//testcase)[1][@name='nothing ran']/skipped")
PY

# 3. The numbers in the XML are tpbench's: each case's suite against its record.
for run in smoke mixed none; do
  python3 - "$(run_dir_of "$SCRATCH/$run")/results.jsonl" "$SCRATCH/$run.xml" <<'PY' || fail "$run: suites and records disagree"
import json, sys
from lxml import etree
records = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    records[r["case_id"]] = r  # the last record of a case counts
suites = {}
for suite in etree.parse(sys.argv[2]).iter("testsuite"):
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    if "case_id" in props:
        suites[props["case_id"]] = (suite, props)
assert set(suites) == set(records), (sorted(suites), sorted(records))
fields = {"latency_p50_us": ("latency", "p50"), "latency_p99_us": ("latency", "p99"),
          "algbw_GBps": ("throughput", "algbw_GBps"), "busbw_GBps": ("throughput", "busbw_GBps"),
          "tokens_per_s": ("throughput", "tokens_per_s")}
classnames = set()
for case_id, (suite, props) in suites.items():
    r = records[case_id]
    assert suite.get("name") == r["label"], (suite.get("name"), r["label"])
    assert props.pop("case_id") == case_id and props.pop("status") == r["status"], props
    held = {name: (r.get(a) or {}).get(b) for name, (a, b) in fields.items()}
    held = {name: v for name, v in held.items() if isinstance(v, (int, float))}
    assert set(props) == set(held), f"{case_id}: properties {sorted(props)}, record numbers {sorted(held)}"
    for name, value in props.items():
        assert float(value) == held[name], f"{case_id}: {name}={value}, the record holds {held[name]}"
    cases = suite.findall("testcase")
    assert cases[0].get("name") == "run" and len({c.get("classname") for c in cases}) == 1, etree.tostring(suite)
    classname = cases[0].get("classname")
    assert classname.startswith(f"tpbench.{r['scenario']}.") and classname not in classnames, classname
    classnames.add(classname)
    assert cases[0].get("time") == f"{r.get('wall_s', 0.0):.3f}", (cases[0].get("time"), r.get("wall_s"))
print(f"{sys.argv[2]}: {len(suites)} case suites match their records")
PY
done

# ... and each qualification row's suite against its row in qualify.json: the testcase's time
# is the row's measured wall time (a measured row took some), its properties the row's numbers.
for q in q-smoke q-tight; do
  python3 - "$SCRATCH/$q/qualify.json" "$SCRATCH/$q/qualify.junit.xml" <<'PY' || fail "$q: suites and qualify.json disagree"
import json, sys
from lxml import etree
rows = json.load(open(sys.argv[1]))["rows"]
suites = list(etree.parse(sys.argv[2]).iter("testsuite"))
assert len(suites) == len(rows), (len(suites), len(rows))
for suite, row in zip(suites, rows):
    assert suite.get("name") == f"{row['probe']}/{row['item']}", suite.get("name")
    (case,) = suite.findall("testcase")
    assert case.get("name") == row["item"] and case.get("classname").startswith("tpbench.qualify."), etree.tostring(case)
    assert case.get("classname").endswith("." + row["probe"]), case.get("classname")
    assert row["wall_s"] > 0 and case.get("time") == f"{row['wall_s']:.3f}", (row["probe"], row["item"], row["wall_s"], case.get("time"))
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props.pop("verdict") == row["verdict"] and props.pop("unit") == row["unit"], props
    assert {k: float(v) for k, v in props.items()} == {k: row[k] for k in ("value", "threshold", "baseline") if row[k] is not None}, props
print(f"{sys.argv[2]}: {len(rows)} row suites match qualify.json")
PY
done
echo "junit schema: ok"
