#!/usr/bin/env python3
"""Mutation testing of tpbench's verdict rules: plant one bug at a time, rebuild, run the tests
that guard that rule, and count the mutants the tests kill.

The mutants are curated (tests/mutation/mutants.json): each names a file, an exact snippet that
occurs there once, its replacement (the planted bug), the build targets to rebuild and the
tests to run (`gtest`: a filter for tpb_unit_tests, run directly; `ctest`: a ctest -R regex).
A mutant is killed when a test fails (or times out), survives when every test passes, and is
stillborn when it does not build (not counted). A survivor fails the run unless the list marks
it `equivalent` with the reason.

The tree is mutated in place, one file at a time, and every file is restored afterwards (also
on Ctrl-C); a mutant whose file has uncommitted changes is refused, so that nothing of yours
is ever overwritten. Run it in a clean checkout or a worktree, after building the build dir:

    cmake --preset ci && ninja -C build-ci tpb_unit_tests tpbench
    scripts/mutation_test.py --build build-ci                # every mutant
    scripts/mutation_test.py --build build-ci --slice 3/8    # the mutants whose index % 8 == 3
    scripts/mutation_test.py --build build-ci --slice auto/8 # the slice of this commit (CI)
    scripts/mutation_test.py --list                          # the list, nothing run

Exit status: 0 no survivor outside the equivalent list, 1 a survivor, 2 bad input (the list,
a snippet not found once, a dirty file).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LIST = os.path.join(ROOT, "tests", "mutation", "mutants.json")
REQUIRED = ("id", "rule", "file", "find", "replace", "targets")


def fail_input(message):
    print(f"mutation_test: {message}", file=sys.stderr)
    sys.exit(2)


def load_mutants(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail_input(f"{path}: {e}")
    mutants = doc.get("mutants") if isinstance(doc, dict) else None
    if not isinstance(mutants, list) or not mutants:
        fail_input(f"{path}: $.mutants: expected a non-empty list")
    seen = set()
    for i, m in enumerate(mutants):
        where = f"{path}: $.mutants[{i}]"
        if not isinstance(m, dict):
            fail_input(f"{where}: expected an object")
        for key in REQUIRED:
            if key not in m:
                fail_input(f"{where}.{key}: missing")
        if ("gtest" in m) == ("ctest" in m):
            fail_input(f"{where}: exactly one of gtest (a filter) and ctest (a regex)")
        if m["id"] in seen:
            fail_input(f"{where}.id: {m['id']!r} twice")
        seen.add(m["id"])
        if m["find"] == m["replace"]:
            fail_input(f"{where}: replace equals find")
        if "equivalent" in m and not (isinstance(m["equivalent"], str) and m["equivalent"].strip()):
            fail_input(f"{where}.equivalent: the reason, a non-empty string")
    return mutants


def parse_slice(spec, fail):
    """--slice N/M or auto/M -> (N, M); auto picks N from the commit count, so that each commit
    runs another slice and every mutant runs within M submissions. Bad input calls fail(message).
    Shared with scripts/mutation_report.py."""
    part, _, count = spec.partition("/")
    try:
        count = int(count)
        if part == "auto":
            out = subprocess.run(["git", "-C", ROOT, "rev-list", "--count", "HEAD"], capture_output=True, text=True)
            part = int(out.stdout.strip() or 0) % count
        part = int(part)
    except (ValueError, ZeroDivisionError):
        fail(f"--slice {spec}: expected N/M or auto/M")
    if count < 1 or not 0 <= part < count:
        fail(f"--slice {spec}: expected 0 <= N < M")
    return part, count


def pick_slice(mutants, spec):
    if not spec:
        return mutants
    part, count = parse_slice(spec, fail_input)
    return [m for i, m in enumerate(mutants) if i % count == part]


def run(cmd, timeout_s, cwd=ROOT):
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")


class PlantedFile:
    """One file with one mutant in it; restored on exit, whatever happens."""

    def __init__(self, path, find, replace):
        self.path, self.find, self.replace, self.original = path, find, replace, None

    def __enter__(self):
        with open(self.path, encoding="utf-8") as f:
            self.original = f.read()
        n = self.original.count(self.find)
        if n != 1:
            raise ValueError(f"{os.path.relpath(self.path, ROOT)}: the snippet occurs {n} times, expected once: {self.find!r}")
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(self.original.replace(self.find, self.replace, 1))
        return self

    def __exit__(self, *exc):
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(self.original)
        return False


def run_tests(m, build, timeout_s):
    if "gtest" in m:
        return run([os.path.join(build, "tests", "tpb_unit_tests"), f"--gtest_filter={m['gtest']}", "--gtest_brief=1"],
                   timeout_s)
    return run(["ctest", "--test-dir", build, "-R", m["ctest"], "--timeout", str(timeout_s)], timeout_s * 4)


def check_clean_runs(mutants, build, timeout_s):
    """Every test selection passes on the tree as it is, or no verdict means anything."""
    for key in sorted({("gtest", m["gtest"]) if "gtest" in m else ("ctest", m["ctest"]) for m in mutants}):
        rc, out = run_tests({key[0]: key[1]}, build, timeout_s)
        if rc != 0:
            fail_input(f"the tests of {key[0]} {key[1]!r} fail without any mutant (build {build} up to date?):\n"
                       + "\n".join(out.strip().splitlines()[-8:]))
        if "[  PASSED  ] 0 tests" in out or "No tests were found" in out:
            fail_input(f"{key[0]} {key[1]!r} selects no test")


def judge(m, build, timeout_s):
    path = os.path.join(ROOT, m["file"])
    dirty = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "--", m["file"]]).returncode
    if dirty != 0:
        fail_input(f"{m['file']} has uncommitted changes: commit or stash them (nothing is overwritten)")
    try:
        with PlantedFile(path, m["find"], m["replace"]):
            rc, out = run(["ninja", "-C", build] + m["targets"], 1800)
            if rc != 0:
                return "stillborn", out.strip().splitlines()[-1:] if out else []
            rc, _ = run_tests(m, build, timeout_s)
            return ("survived" if rc == 0 else "killed"), []
    except ValueError as e:
        fail_input(f"mutant {m['id']}: {e}")
    finally:
        # The restored file must not leave a stale build behind for the next mutant.
        run(["ninja", "-C", build] + m["targets"], 1800)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list-file", default=DEFAULT_LIST)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-ci"), help="a configured and built build dir")
    ap.add_argument("--slice", help="N/M: the mutants whose index %% M == N; auto/M: this commit's slice")
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per test run")
    ap.add_argument("--json", help="write the verdicts here")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    args = ap.parse_args()
    mutants = load_mutants(args.list_file)
    if args.list:
        for i, m in enumerate(mutants):
            print(f"{i:3d} {m['id']:40s} {m['rule']:24s} {m['file']}" + ("  (equivalent)" if "equivalent" in m else ""))
        return 0
    chosen = pick_slice(mutants, args.slice)
    if args.only:
        ids = set(args.only.split(","))
        chosen = [m for m in chosen if m["id"] in ids]
        missing = ids - {m["id"] for m in chosen}
        if missing:
            fail_input(f"--only: no mutant {', '.join(sorted(missing))}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))  # restores the file through __exit__
    rc, out = run(["ninja", "-C", args.build] + sorted({t for m in chosen for t in m["targets"]}), 3600)
    if rc != 0:
        fail_input(f"the build in {args.build} fails before any mutant:\n" + "\n".join(out.strip().splitlines()[-8:]))
    check_clean_runs(chosen, args.build, args.timeout)
    verdicts, t0 = [], time.time()
    for m in chosen:
        t = time.time()
        verdict, why = judge(m, args.build, args.timeout)
        verdicts.append({"id": m["id"], "rule": m["rule"], "verdict": verdict, "seconds": round(time.time() - t, 1),
                         "equivalent": m.get("equivalent")})
        print(f"{verdict:9s} {m['id']:40s} {m['rule']:24s} {time.time() - t:6.1f} s" + (f"  {why[0]}" if why else ""),
              flush=True)
    counted = [v for v in verdicts if v["verdict"] != "stillborn"]
    killed = sum(v["verdict"] == "killed" for v in counted)
    equivalent = [v for v in counted if v["verdict"] == "survived" and v["equivalent"]]
    survivors = [v for v in counted if v["verdict"] == "survived" and not v["equivalent"]]
    scored = len(counted) - len(equivalent)
    score = 100.0 * killed / scored if scored else 100.0
    print(f"\nmutation score {score:.1f} % ({killed} killed of {scored}; {len(equivalent)} equivalent, "
          f"{len(verdicts) - len(counted)} stillborn; {len(verdicts)} mutants in {time.time() - t0:.0f} s)")
    for v in equivalent:
        print(f"  equivalent {v['id']}: {v['equivalent']}")
    for v in survivors:
        print(f"  SURVIVED {v['id']} ({v['rule']}): no test fails on this planted bug")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"score": score, "verdicts": verdicts}, f, indent=1)
    return 1 if survivors else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("mutation_test: interrupted; every planted file restored", file=sys.stderr)
        sys.exit(130)
