#!/usr/bin/env python3
"""The JSON schemas in schemas/ against what tpbench reads and writes.

usage: validate.py TPBENCH SCRATCH     (ctest runs it from the source tree: schemas.validate)

- scenario.schema.json: every scenario under scenarios/ (model presets in scenarios/models/
  and qualification profiles, the files with "probes", are not scenarios) and the scenario
  examples of README.md and docs/*.md validate, and `tpbench run --dry-run` accepts
  each; broken copies of ci-smoke (an unknown top-level key,
  a TP written as a string, ...) fail the schema AND make tpbench exit 2, so the schema and
  the C++ validator (suite/scenario/scenario.cpp) say the same.
- record.schema.json and run.schema.json: the records and run.json of real CPU runs made
  here (ci-smoke as the brief of the schemas asks, an engine sweep for plans, memory and
  outputs, a baseline pair for baseline sections), the committed fixture
  (tests/data/results_fixture) and the stored baselines (baselines/*/*.jsonl, real GPU
  records) validate; records with a wrong type in a key field (status 3, latency.p50 "x")
  fail.
- qualify_profile.schema.json: every qualification profile under scenarios/qualify/
  validates; broken copies of cpu-smoke (an unknown key, an unknown probe, a conformance
  probe with a threshold, ...) fail the schema AND make `tpbench qualify` exit 2 before it
  measures anything.
- The schemas' check and backend names are those `tpbench list` prints.

Needs python3-jsonschema (draft 2020-12: jsonschema >= 4.0); exits 77, which ctest reads as
skipped, without it. scripts/setup.sh installs it.
"""

import copy
import glob
import json
import os
import re
import subprocess
import sys
import unittest

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMAS = os.path.join(ROOT, "schemas")

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError:  # pragma: no cover - depends on the machine
    print("SKIP: python3 has no jsonschema >= 4.0 (apt-get install python3-jsonschema, or "
          "scripts/setup.sh test)")
    sys.exit(SKIP)

TPBENCH = None
SCRATCH = None


def load_schema(name):
    with open(os.path.join(SCHEMAS, name), encoding="utf-8") as f:
        return json.load(f)


SCHEMA_FILES = ("scenario.schema.json", "record.schema.json", "run.schema.json", "qualify_profile.schema.json")
SCHEMA_DOCS = {name: load_schema(name) for name in SCHEMA_FILES}


def validator(name):
    """A draft 2020-12 validator of schemas/<name>, its references to the other two schemas
    resolved from the files here (never fetched)."""
    schema = SCHEMA_DOCS[name]
    try:  # jsonschema >= 4.18
        from referencing import Registry, Resource
        registry = Registry().with_resources(
            (doc["$id"], Resource.from_contents(doc)) for doc in SCHEMA_DOCS.values())
        return Draft202012Validator(schema, registry=registry)
    except ImportError:  # Debian 12's 4.10
        resolver = jsonschema.RefResolver.from_schema(
            schema, store={doc["$id"]: doc for doc in SCHEMA_DOCS.values()})
        return Draft202012Validator(schema, resolver=resolver)


SCENARIO = validator("scenario.schema.json")
RECORD = validator("record.schema.json")
RUN = validator("run.schema.json")
PROFILE = validator("qualify_profile.schema.json")


def problems(v, doc):
    """Every violation, one line each: '<json path>: <message>'."""
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path)
        message = e.message if len(e.message) < 300 else e.message[:297] + "..."
        out.append(f"{path}: {message}")
    return out


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def tpbench(*args, cwd=ROOT):
    return subprocess.run([TPBENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=240)


def edited(doc, edit):
    """A deep copy of `doc` with `edit` applied: one broken variant of a good document."""
    out = copy.deepcopy(doc)
    edit(out)
    return out


def expect_refused(test, validator, kind, cases, command):
    """Each broken document (`cases`: what is wrong -> document) fails the schema AND makes
    tpbench exit 2: the schema and the C++ validator say the same. `command(path)` runs
    tpbench on the document written to `path`."""
    os.makedirs(SCRATCH, exist_ok=True)
    for what, doc in cases.items():
        with test.subTest(broken=what):
            test.assertNotEqual(problems(validator, doc), [], f"the schema accepts a {kind} with {what}")
            path = os.path.join(SCRATCH, kind + "-" + re.sub(r"[^a-z0-9]+", "-", what) + ".json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            out = command(path)
            test.assertEqual(out.returncode, 2, f"tpbench accepts a {kind} with {what}: {out.stdout}{out.stderr}")


def scenario_files():
    """Every scenario under scenarios/: not the model presets, not the qualification profiles."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "scenarios", "**", "*.json"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(os.path.join("scenarios", "models") + os.sep):
            continue
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if isinstance(doc, dict) and "probes" in doc:  # a qualification profile (suite/qualify/qualify.cpp)
            continue
        out.append((rel, doc))
    return out


class Schemas(unittest.TestCase):
    def test_schemas_are_valid_draft_2020_12(self):
        for name, doc in SCHEMA_DOCS.items():
            with self.subTest(schema=name):
                Draft202012Validator.check_schema(doc)

    def test_names_are_those_tpbench_lists(self):
        listed = tpbench("list", "--json")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        doc = json.loads(listed.stdout)
        checks = SCHEMA_DOCS["scenario.schema.json"]["$defs"]["check_name"]["enum"]
        self.assertEqual(sorted(checks), sorted(c["name"] for c in doc["checks"]))
        self.assertEqual(checks, SCHEMA_DOCS["record.schema.json"]["$defs"]["check_name"]["enum"])
        backends = SCHEMA_DOCS["scenario.schema.json"]["$defs"]["axis_value"]["allreduce"]["enum"]
        self.assertEqual(sorted(backends), sorted(b["name"] for b in doc["allreduce_backends"]))


class Scenarios(unittest.TestCase):
    def test_every_scenario_validates_and_tpbench_accepts_it(self):
        files = scenario_files()
        self.assertGreaterEqual(len(files), 20, "fewer scenarios than the tree holds: the glob is wrong")
        for rel, doc in files:
            with self.subTest(scenario=rel):
                self.assertEqual(problems(SCENARIO, doc), [], rel)
                dry = tpbench("run", rel, "--dry-run")
                self.assertEqual(dry.returncode, 0, f"{rel}: tpbench --dry-run: {dry.stderr}")

    def test_examples_in_the_docs_are_valid_scenarios(self):
        examples = []
        # Every page, so that an example moved between the README and docs/ stays checked.
        pages = glob.glob(os.path.join(ROOT, "docs", "*.md"))
        docs = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in pages)
        for doc in docs:
            with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
                for n, block in enumerate(re.findall(r"```json\n(.*?)```", f.read(), re.S)):
                    if '"schema"' in block and '"workload"' in block:
                        examples.append((f"{doc} example {n + 1}", block))
        self.assertGreaterEqual(len(examples), 2)
        os.makedirs(SCRATCH, exist_ok=True)
        for where, text in examples:
            with self.subTest(example=where):
                self.assertEqual(problems(SCENARIO, json.loads(text)), [], where)
                path = os.path.join(SCRATCH, re.sub(r"[^a-z0-9]+", "-", where.lower()) + ".json")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                dry = tpbench("run", path, "--dry-run")
                self.assertEqual(dry.returncode, 0, f"{where}: tpbench --dry-run: {dry.stderr}")

    def test_broken_scenarios_fail_the_schema_and_tpbench(self):
        with open(os.path.join(ROOT, "scenarios", "ci-smoke.json"), encoding="utf-8") as f:
            good = json.load(f)
        self.assertEqual(problems(SCENARIO, good), [])

        def broken(edit):
            return edited(good, edit)

        cases = {
            "unknown top-level key": broken(lambda d: d.update(sweeps=d["sweep"])),
            "tp as a string": broken(lambda d: d["sweep"].update(tp=["2"])),
            "unknown axis": broken(lambda d: d["sweep"].update(batch=[1])),
            "engine axis on the allreduce workload": broken(lambda d: d["sweep"].update(batch_size=[1])),
            "a GPU backend with device cpu": broken(lambda d: d["sweep"].update(allreduce=["nccl"])),
            "min_duration_s (refused until honoured)": broken(lambda d: d["measure"].update(min_duration_s=1)),
            "timeout under 0.1 s": broken(lambda d: d["measure"].update(timeout_s=0.01)),
            "unknown check": broken(lambda d: d["checks"].append("bitwise")),
            "judged baseline with 1 repetition": broken(lambda d: d.update(baseline={"latency_rel_tol": 0.05})),
            "schema 2": broken(lambda d: d.update(schema=2)),
        }
        with open(os.path.join(ROOT, "scenarios", "conformance", "cpu-engine-decode.json"), encoding="utf-8") as f:
            engine = json.load(f)
        self.assertEqual(problems(SCENARIO, engine), [])
        for what, mode in {"a mode listed twice": ["decode", "decode"], "mode \"both\"": "both"}.items():
            cases[what] = dict(copy.deepcopy(engine), mode=mode)
        cases["matches_reference on the engine"] = dict(copy.deepcopy(engine), checks=["matches_reference"])
        expect_refused(self, SCENARIO, "scenario", cases, lambda path: tpbench("run", path, "--dry-run"))


def profile_files():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "scenarios", "qualify", "*.json"))):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if isinstance(doc, dict) and "probes" in doc:
            out.append((os.path.relpath(path, ROOT), doc))
    return out


class QualifyProfiles(unittest.TestCase):
    def test_every_profile_validates(self):
        files = profile_files()
        self.assertGreaterEqual(len(files), 5, "fewer profiles than the tree holds: the glob is wrong")
        for rel, doc in files:
            with self.subTest(profile=rel):
                self.assertEqual(problems(PROFILE, doc), [], rel)

    def test_broken_profiles_fail_the_schema_and_tpbench(self):
        with open(os.path.join(ROOT, "scenarios", "qualify", "cpu-smoke.json"), encoding="utf-8") as f:
            good = json.load(f)

        def broken(edit):
            return edited(good, edit)

        def probe(kind):
            return next(p for p in good["probes"] if p["probe"] == kind)

        cases = {
            "unknown top-level key": broken(lambda d: d.update(probe=[])),
            "schema 2": broken(lambda d: d.update(schema=2)),
            "device gpu": broken(lambda d: d.update(device="gpu")),
            "no probes": broken(lambda d: d.update(probes=[])),
            "unknown probe": broken(lambda d: d["probes"].append({"probe": "disk_speed"})),
            "a threshold as a string": broken(lambda d: d["probes"][0].update(min_GBps="1")),
            "tolerance 1": broken(lambda d: d.update(baseline_tolerance=1)),
            "a scenario probe without its scenario": broken(
                lambda d: d["probes"].append({"probe": "engine_decode", "max_latency_us": 5})),
            "a conformance probe with a threshold": broken(lambda d: d["probes"].append(
                {"probe": "conformance", "scenario": probe("engine_decode")["scenario"], "max_latency_us": 5})),
        }
        self.assertEqual(problems(PROFILE, good), [])
        expect_refused(self, PROFILE, "profile", cases,
                       lambda path: tpbench("qualify", path, "--out", os.path.join(SCRATCH, "qualify-out")))


class Results(unittest.TestCase):
    runs = {}  # name -> run folder

    @classmethod
    def setUpClass(cls):
        root = os.path.join(SCRATCH, "results")

        def run(name, *args, exits=(0,)):
            folder = os.path.join(root, name)
            done = tpbench("run", *args, "--no-report", "--results-dir", folder)
            if done.returncode not in exits:
                raise AssertionError(f"tpbench run {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
            (run_dir,) = glob.glob(os.path.join(folder, "*", ""))
            cls.runs[name] = run_dir

        # The brief's run: the CPU smoke scenario, from the source tree.
        run("ci-smoke", "scenarios/ci-smoke.json")
        # Engine records: plans, measured memory, logits samples, plan_matches_measured.
        run("engine", "scenarios/conformance/cpu-engine-decode.json")
        # CPU engine cases planned infeasible: the host plan (100 KiB given to the ranks, less than the weights).
        run("cpu-infeasible", "scenarios/conformance/cpu-engine-decode.json", "--cpu-mem-gib", "0.0001")
        # Baseline sections: store a baseline (this build may be dirty: forced), then compare.
        # Their latency verdicts judge this machine's timing, which a busy runner moves (a
        # drifting control or a regression exits 1): only the records are judged here.
        baselines = os.path.join(SCRATCH, "baselines")
        run("baseline-store", "scenarios/conformance/cpu-baseline-control.json", "--baselines", baselines,
            "--update-baselines", "--force-dirty-baseline", "schema test", exits=(0, 1))
        run("baseline-compare", "scenarios/conformance/cpu-baseline-control.json", "--baselines", baselines,
            "--allow-unlike-baseline", exits=(0, 1))

    def check_records(self, path, records):
        self.assertTrue(records, f"{path}: no record")
        for i, rec in enumerate(records, start=1):
            self.assertEqual(problems(RECORD, rec), [], f"{path}:{i} ({rec.get('label')})")

    def test_real_runs(self):
        for name, run_dir in self.runs.items():
            with self.subTest(run=name):
                records = read_jsonl(os.path.join(run_dir, "results.jsonl"))
                self.check_records(run_dir, records)
                with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
                    self.assertEqual(problems(RUN, json.load(f)), [], f"{run_dir}/run.json")
        compared = read_jsonl(os.path.join(self.runs["baseline-compare"], "results.jsonl"))
        self.assertTrue(any(isinstance(r["baseline"], dict) and "latency_us" in r["baseline"] for r in compared),
                        "the compare run has no baseline section to validate")

    def test_infeasible_cpu_cases_carry_the_host_plan(self):
        records = read_jsonl(os.path.join(self.runs["cpu-infeasible"], "results.jsonl"))
        self.assertTrue(records and all(r["status"] == "infeasible" for r in records), [r["status"] for r in records])
        self.assertTrue(all(r["plan"]["host_memory_source"] == "--cpu-mem-gib 0.0001" for r in records))

    def test_fixtures_and_stored_baselines(self):
        files = sorted(set(glob.glob(os.path.join(ROOT, "tests", "**", "results.jsonl"), recursive=True) +
                           glob.glob(os.path.join(ROOT, "report", "**", "results.jsonl"), recursive=True)))
        self.assertIn(os.path.join(ROOT, "tests", "data", "results_fixture", "results.jsonl"), files)
        for path in files:
            with self.subTest(file=os.path.relpath(path, ROOT)):
                self.check_records(path, read_jsonl(path))
                run_json = os.path.join(os.path.dirname(path), "run.json")
                if os.path.exists(run_json):
                    with open(run_json, encoding="utf-8") as f:
                        self.assertEqual(problems(RUN, json.load(f)), [], run_json)
        stored = sorted(glob.glob(os.path.join(ROOT, "baselines", "*", "*.jsonl")))
        self.assertTrue(stored)
        for path in stored:
            with self.subTest(file=os.path.relpath(path, ROOT)):
                self.check_records(path, read_jsonl(path))

    def test_wrong_records_fail(self):
        good = read_jsonl(os.path.join(self.runs["ci-smoke"], "results.jsonl"))[0]
        self.assertEqual(problems(RECORD, good), [])

        def broken(edit):
            return edited(good, edit)

        cases = {
            "status 3": broken(lambda r: r.update(status=3)),
            "status not one of the five": broken(lambda r: r.update(status="passed")),
            "latency.p50 \"x\"": broken(lambda r: r["latency"].update(p50="x")),
            "latency unit ms": broken(lambda r: r["latency"].update(unit="ms")),
            "a sample that is a string": broken(lambda r: r["latency"]["samples_us"].__setitem__(0, "1.0")),
            "case_id 42": broken(lambda r: r.update(case_id=42)),
            "no status": broken(lambda r: r.pop("status")),
            "an unknown key": broken(lambda r: r.update(statuss="ok")),
            "a digest that is not 16 hex digits": broken(lambda r: r["digests"][0].update(output="abc")),
            "a check verdict \"ok\"": broken(lambda r: r["checks"]["matches_reference"].update(status="ok")),
            "throughput basis max": broken(lambda r: r["throughput"].update(basis="max")),
            "an ok record with an error": broken(lambda r: r.update(error="boom")),
            "params.tp \"2\"": broken(lambda r: r["params"].update(tp="2")),
        }
        for what, rec in cases.items():
            with self.subTest(broken=what):
                self.assertNotEqual(problems(RECORD, rec), [], f"the record schema accepts {what}")

        with open(os.path.join(self.runs["ci-smoke"], "run.json"), encoding="utf-8") as f:
            run = json.load(f)
        self.assertEqual(problems(RUN, run), [])
        runs = {
            "summary.exit_code \"0\"": lambda j: j["summary"].update(exit_code="0"),
            "an unknown key": lambda j: j.update(summry={}),
            "a scenario document with an unknown key": lambda j: j["scenario"]["document"].update(sweeps={}),
            "a case without its id": lambda j: j["cases"][0].pop("case_id"),
        }
        for what, edit in runs.items():
            with self.subTest(broken_run_json=what):
                doc = copy.deepcopy(run)
                edit(doc)
                self.assertNotEqual(problems(RUN, doc), [], f"the run.json schema accepts {what}")


def main(argv):
    global TPBENCH, SCRATCH
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    TPBENCH, SCRATCH = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    if os.path.exists(SCRATCH):
        subprocess.run(["rm", "-rf", SCRATCH], check=True)
    os.makedirs(SCRATCH)
    result = unittest.main(argv=[argv[0], "-v"], exit=False).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
