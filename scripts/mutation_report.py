#!/usr/bin/env python3
"""Mutation testing of the report's verdict rules (report/*.py) with mutmut: every mutant mutmut
makes of the curated functions is planted, the tests that call that function run, and a mutant
is killed when one of them fails (or times out). scripts/mutation_test.py does the same for the
C++ with a hand-written list; here mutmut writes the mutants and the list names the functions.

The list (tests/mutation/report_mutants.json) names the tests to run, the functions whose
mutants count (grouped by the rule they decide), the functions left out with the reason, and
the equivalent mutants: a survivor that cannot change what the report says, named by its
function and the line as mutated (not by mutmut's number, which moves when the function
changes), with the reason. Every function of a planted module must be either listed or left
out, so a new function is a decision, not an oversight.

mutmut imports the code it mutates by module name from src/ (or the root) and tells a test
what it reached by that name, while the report's modules and their tests import each other
as top-level modules from report/. So the run happens in a staging folder: report/*.py as
src/*.py, the listed tests under tests/report/, a pyproject.toml with the [tool.mutmut]
settings; the tree itself is never written to. Only tests that call the functions in their
own process reach a mutant: tests that run make_report.py as a child process (most of
tests/report/) are not listed.

    scripts/mutation_report.py                    # every mutant of the curated functions
    scripts/mutation_report.py --slice 3/5        # the mutants whose number ends in 3 or 8
    scripts/mutation_report.py --slice auto/5     # the slice of this commit (CI)
    scripts/mutation_report.py --only tables.num  # the mutants of some functions
    scripts/mutation_report.py --list             # the functions and exclusions, nothing run

A slice takes the mutants whose number, taken mod 10, is N mod M (M divides 10), so that each
rule is sampled in every slice and every mutant runs within M submissions.

Exit status: 0 no survivor outside the equivalent list; 1 a survivor (or, on a full run, an
equivalent entry no survivor matches: a test now kills it or the line changed); 2 bad input
(the list, a function it names or misses, mutmut missing, the tests failing unmutated).
"""
import argparse
import ast
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutation_test import parse_slice  # noqa: E402  the --slice rule both scripts share
REPORT = os.path.join(ROOT, "report")
DEFAULT_LIST = os.path.join(ROOT, "tests", "mutation", "report_mutants.json")
SEPARATOR = "\u01c1"  # mutmut's "ǁ" in the name of a method's mutants
# mutmut's exit codes of a mutant's test run (mutmut/stats.py): a failing test, pytest's
# internal error, the CPU-time limit and a crash all kill it.
KILLED = {1, 3, 36, 24, -24, 152, 255, -11, -9}
SURVIVED = {0}
NO_TESTS = {5, 33}
MUTMUT = "import sys\nfrom mutmut.__main__ import cli\nsys.exit(cli())"
DIFFS = """import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
names = json.load(sys.stdin)
json.dump({n: get_diff_for_mutant(n, path="src/" + n.split(".")[0] + ".py") for n in names}, sys.stdout)
"""


def fail_input(message):
    print(f"mutation_report: {message}", file=sys.stderr)
    sys.exit(2)


def module_functions(module):
    """The functions mutmut mutates in report/<module>.py: top-level functions and methods of
    top-level classes, as "module.function" or "module.Class.method"."""
    path = os.path.join(REPORT, module + ".py")
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError) as e:
        fail_input(f"{path}: {e}")
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(f"{module}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            names += [f"{module}.{node.name}.{item.name}" for item in node.body
                      if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return names


def load_list(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail_input(f"{path}: {e}")
    if not isinstance(doc, dict):
        fail_input(f"{path}: expected an object")
    for key in ("tests", "rules", "excluded", "equivalent"):
        if not isinstance(doc.get(key), list):
            fail_input(f"{path}: $.{key}: expected a list")
    for i, test in enumerate(doc["tests"]):
        if not (isinstance(test, str) and os.path.isfile(os.path.join(ROOT, test))):
            fail_input(f"{path}: $.tests[{i}]: {test!r} is not a file of the tree")
    curated = {}
    for i, group in enumerate(doc["rules"]):
        if not (isinstance(group, dict) and isinstance(group.get("rule"), str)
                and isinstance(group.get("functions"), list) and group["functions"]):
            fail_input(f"{path}: $.rules[{i}]: expected {{rule, functions: [module.function, ...]}}")
        for name in group["functions"]:
            if name in curated:
                fail_input(f"{path}: $.rules[{i}]: {name} listed twice")
            curated[name] = group["rule"]
    excluded = []
    for i, group in enumerate(doc["excluded"]):
        if not (isinstance(group, dict) and isinstance(group.get("functions"), list)
                and isinstance(group.get("reason"), str) and group["reason"].strip()):
            fail_input(f"{path}: $.excluded[{i}]: expected {{functions: [pattern, ...], reason}}")
        excluded += [(pattern, group["reason"]) for pattern in group["functions"]]
    for i, entry in enumerate(doc["equivalent"]):
        if not (isinstance(entry, dict) and all(isinstance(entry.get(k), str) and entry[k].strip()
                                                for k in ("function", "line", "mutant", "reason"))):
            fail_input(f"{path}: $.equivalent[{i}]: expected {{function, line, mutant, reason}}")
        if entry["function"] not in curated:
            fail_input(f"{path}: $.equivalent[{i}]: {entry['function']} is not a curated function")
    # Every curated function exists, and every function of a planted module is decided.
    modules = sorted({name.split(".")[0] for name in curated})
    for module in modules:
        for name in module_functions(module):
            if name not in curated and not any(fnmatch.fnmatchcase(name, p) for p, _ in excluded):
                fail_input(f"{path}: {name} is neither curated (rules) nor excluded with a reason")
    known = {name for module in modules for name in module_functions(module)}
    for name in curated:
        if name not in known:
            fail_input(f"{path}: {name}: no such function in report/")
    return doc, curated, excluded, modules


def mangled(name):
    """"tables.num" -> "tables.x_num"; "results_io._Validator.fail" -> "results_io.xǁ_Validatorǁfail"."""
    module, _, rest = name.partition(".")
    if "." in rest:
        cls, _, method = rest.partition(".")
        return f"{module}.x{SEPARATOR}{cls}{SEPARATOR}{method}"
    return f"{module}.x_{rest}"


def digits_of_slice(spec):
    """N/M or auto/M (mutation_test.parse_slice) -> the last digits of the mutant numbers in
    the slice (None: all); M must divide 10, so that the digits split evenly."""
    if not spec:
        return None
    part, count = parse_slice(spec, fail_input)
    if 10 % count:
        fail_input(f"--slice {spec}: expected 0 <= N < M, M one of 1, 2, 5, 10")
    return "".join(str(d) for d in range(10) if d % count == part)


def unplanted(source, module, curated):
    """The source with "# pragma: no mutate block" on the header line of every function that
    is not curated: mutmut neither mutates nor wraps it (generating plots.py's 3,700 mutants
    for the 75 of its three curated functions took 26 s of the CI slice's minutes)."""
    lines = source.split("\n")
    tree = ast.parse(source)
    defs = [(f"{module}.{n.name}", n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        defs += [(f"{module}.{cls.name}.{n.name}", n) for n in cls.body
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for name, node in defs:
        if name in curated:
            continue
        # The header ends on the line before the body's first statement (a docstring included).
        i = max(node.body[0].lineno - 2, node.lineno - 1)
        while i > node.lineno - 1 and not lines[i].split("#")[0].rstrip().endswith(":"):
            i -= 1
        code, hash_, comment = lines[i].partition("#")
        lines[i] = code.rstrip() + "  # pragma: no mutate block" + (f"; {comment.strip()}" if hash_ else "")
    return "\n".join(lines)


def stage(where, doc, modules, curated):
    """report/*.py as src/*.py (functions not curated marked for mutmut to leave alone), the
    tests, and mutmut's settings."""
    src = os.path.join(where, "src")
    os.makedirs(src)
    for name in os.listdir(REPORT):
        if name.endswith(".py"):
            with open(os.path.join(REPORT, name), encoding="utf-8") as f:
                source = f.read()
            module = name[:-3]
            if module in modules:
                source = unplanted(source, module, curated)
            with open(os.path.join(src, name), "w", encoding="utf-8") as f:
                f.write(source)
    for test in doc["tests"] + ["tests/report/report_test_util.py"]:
        target = os.path.join(where, test)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, test), target)
    settings = {
        "source_paths": ["src"],
        "only_mutate": [f"src/{m}.py" for m in modules],
        "pytest_add_cli_args_test_selection": ["tests/report"],
        "pytest_add_cli_args": ["-p", "no:cacheprovider"],
        "use_git_change_detection": False,
    }
    with open(os.path.join(where, "pyproject.toml"), "w", encoding="utf-8") as f:
        f.write("[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))


def mutmut(where, args, timeout_s):
    try:
        p = subprocess.run([sys.executable, "-c", MUTMUT] + args, cwd=where, capture_output=True, text=True,
                           timeout=timeout_s)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""


def changed_lines(diff):
    """(original lines, mutated lines) of a unified diff, each stripped, joined by newlines."""
    before, after = [], []
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "@@")):
            continue
        if line.startswith("-"):
            before.append(line[1:].strip())
        elif line.startswith("+"):
            after.append(line[1:].strip())
    return "\n".join(before), "\n".join(after)


def mutated_lines(where, names):
    """{mutant: (original lines, mutated lines)}, from mutmut's diff of each (one process for
    all: `mutmut show` takes a second a mutant)."""
    if not names:
        return {}
    try:
        p = subprocess.run([sys.executable, "-c", DIFFS], cwd=where, input=json.dumps(names), capture_output=True,
                           text=True, timeout=600)
        diffs = json.loads(p.stdout)
    except (subprocess.TimeoutExpired, ValueError):
        diffs = {name: mutmut(where, ["show", name], 120)[1] for name in names}
    return {name: changed_lines(diff) for name, diff in diffs.items()}


def read_verdicts(where, modules, patterns):
    """{mutant name: mutmut exit code} of the mutants the patterns select."""
    out = {}
    for module in modules:
        meta = os.path.join(where, "mutants", "src", module + ".py.meta")
        try:
            with open(meta, encoding="utf-8") as f:
                codes = json.load(f)["exit_code_by_key"]
        except (OSError, ValueError, KeyError) as e:
            fail_input(f"mutmut left no results for {module}: {e}")
        out.update({k: v for k, v in codes.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)})
    return out


def judge(verdicts, lines, equivalents, by_mangled):
    """Splits the mutants that were not killed: (equivalent [(mutant, reason)], survivors
    [(mutant, function, why, line, mutated line)], unclear [(mutant, exit code)], the indexes
    of the equivalent entries that matched)."""
    equivalent, survivors, unclear, matched = [], [], [], set()
    for name, code in sorted(verdicts.items()):
        if code in KILLED:
            continue
        if code not in SURVIVED | NO_TESTS:
            unclear.append((name, code))
            continue
        function = by_mangled[name.partition("__mutmut_")[0]]
        line, mutant = lines.get(name, ("", ""))
        hit = next((i for i, e in enumerate(equivalents)
                    if code in SURVIVED and (e["function"], e["line"], e["mutant"]) == (function, line, mutant)), None)
        if hit is None:
            survivors.append((name, function, "no listed test calls it" if code in NO_TESTS else "survived", line,
                              mutant))
        else:
            matched.add(hit)
            equivalent.append((name, equivalents[hit]["reason"]))
    return equivalent, survivors, unclear, matched


def print_scores(modules, verdicts, equivalent):
    """Killed of counted (equivalent ones left out) per module and in all; returns the score."""
    equivalent_names = {name for name, _ in equivalent}
    for module in modules:
        mine = [n for n in verdicts if n.startswith(module + ".")]
        if mine:
            eq = sum(1 for n in mine if n in equivalent_names)
            killed = sum(1 for n in mine if verdicts[n] in KILLED)
            print(f"  {module + '.py':20s} {killed:5d} killed of {len(mine) - eq:5d}"
                  f"  ({100.0 * killed / max(1, len(mine) - eq):5.1f} %; {eq} equivalent)")
    counted = len(verdicts) - len(equivalent)
    killed = sum(1 for code in verdicts.values() if code in KILLED)
    score = 100.0 * killed / counted if counted else 100.0
    print(f"mutation score {score:.1f} % ({killed} killed of {counted}; {len(equivalent)} equivalent)")
    return score


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list-file", default=DEFAULT_LIST)
    ap.add_argument("--slice", help="N/M: mutants whose number mod 10 is N mod M; auto/M: this commit's slice")
    ap.add_argument("--only", help="comma-separated functions (module.function) instead of every curated one")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="mutants run at once")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds for the whole mutmut run")
    ap.add_argument("--keep", help="stage in this (new) folder and leave it, for `mutmut browse` there")
    ap.add_argument("--json", help="write the verdicts here")
    ap.add_argument("--list", action="store_true", help="print the functions and exclusions and exit")
    args = ap.parse_args()
    doc, curated, excluded, modules = load_list(args.list_file)
    if args.list:
        for name, rule in curated.items():
            print(f"{name:36s} {rule}")
        for pattern, reason in excluded:
            print(f"{pattern:36s} excluded: {reason}")
        return 0
    chosen = list(curated)
    if args.only:
        chosen = args.only.split(",")
        unknown = [n for n in chosen if n not in curated]
        if unknown:
            fail_input(f"--only: not curated: {', '.join(unknown)}")
    try:
        from importlib.metadata import version
        have = version("mutmut")
    except Exception:
        fail_input("mutmut is not installed (python3 -m pip install 'mutmut==3.8.*', which brings pytest)")
    if not have.startswith(doc.get("mutmut", "") + "."):
        print(f"mutation_report: mutmut {have}, the list was made with {doc.get('mutmut')}.x: "
              "its mutants, and so the equivalent ones, may differ", file=sys.stderr)
    digits = digits_of_slice(args.slice)
    by_mangled = {mangled(n): n for n in chosen}
    patterns = [f"{m}__mutmut_{'*' if digits is None else f'*[{digits}]'}" for m in by_mangled]

    where = args.keep or tempfile.mkdtemp(prefix="tpb-mutation-report-")
    if args.keep:
        os.makedirs(where)
    t0 = time.time()
    try:
        stage(where, doc, modules, curated)
        rc, out = mutmut(where, ["run", "--max-children", str(args.jobs)] + patterns, args.timeout)
        if rc != 0:
            fail_input(f"mutmut run failed ({rc}) before judging every mutant (do the tests pass unmutated?):\n"
                       + "\n".join(out.strip().splitlines()[-15:]))
        verdicts = read_verdicts(where, modules, patterns)
        lines = mutated_lines(where, [n for n, code in sorted(verdicts.items()) if code in SURVIVED])
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)
    equivalent, survivors, unclear, matched = judge(verdicts, lines, doc["equivalent"], by_mangled)

    print(f"mutation_report: {len(verdicts)} mutants of {len(chosen)} functions"
          + (f", slice {args.slice} (numbers ending in {', '.join(digits)})" if digits else "")
          + f", mutmut {have}, {time.time() - t0:.0f} s")
    score = print_scores(modules, verdicts, equivalent)
    for name, reason in equivalent:
        print(f"  equivalent {name}: {reason}")
    for name, code in unclear:
        print(f"  UNCLEAR {name}: mutmut exit code {code}")
    for name, function, why, line, mutant in survivors:
        print(f"  SURVIVED {name} ({curated[function]}): {why}")
        if line or mutant:
            print("      - " + line.replace("\n", "\n        ") + "\n      + " + mutant.replace("\n", "\n        "))
    # On a full run every listed mutant was judged: an entry nothing matched is out of date.
    stale = [] if digits is not None or args.only else \
        [e for i, e in enumerate(doc["equivalent"]) if i not in matched]
    for e in stale:
        print(f"  STALE equivalent entry of {e['function']}: {e['line']!r} -> {e['mutant']!r}: no survivor is this "
              "mutant (a test kills it now, or the line changed): remove or update the entry")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"score": score, "verdicts": verdicts, "equivalent": [n for n, _ in equivalent],
                       "survivors": [s[0] for s in survivors]}, f, indent=1)
    return 1 if survivors or unclear or stale else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("mutation_report: interrupted", file=sys.stderr)
        sys.exit(130)
