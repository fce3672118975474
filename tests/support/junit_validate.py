#!/usr/bin/env python3
"""Checks JUnit XML files against tests/data/junit/junit-subset.xsd (the subset Jenkins'
xUnit and JUnit plugins and GitLab accept) and that each file's counts say what it holds:
a <testsuite>'s tests, failures, errors and skipped are its testcases and their outcomes,
<testsuites>' tests, failures and errors the sums over its suites (the xUnit plugin and
dashboards show the counts; a file that contradicts itself is read two ways).

usage: junit_validate.py XSD FILE...   exit 0 when every FILE passes, 1 otherwise; each
problem is printed as FILE:LINE: what.
"""
import sys

try:
    from lxml import etree
except ImportError:
    sys.exit("junit_validate.py: python3 cannot import lxml (Debian: apt-get install python3-lxml; "
             "scripts/setup.sh installs it)")


def count_problems(path, root):
    problems = []
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        held = {"tests": len(cases),
                "failures": sum(1 for c in cases if c.find("failure") is not None),
                "errors": sum(1 for c in cases if c.find("error") is not None),
                "skipped": sum(1 for c in cases if c.find("skipped") is not None)}
        for key, n in held.items():
            if int(suite.get(key)) != n:
                problems.append(f"{path}:{suite.sourceline}: testsuite {suite.get('name')!r} says {key}={suite.get(key)}, holds {n}")
        for key in totals:
            totals[key] += held[key]
    for key, n in totals.items():
        if int(root.get(key)) != n:
            problems.append(f"{path}:{root.sourceline}: testsuites says {key}={root.get(key)}, its suites hold {n}")
    return problems


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    schema = etree.XMLSchema(etree.parse(argv[1]))
    failed = False
    for path in argv[2:]:
        try:
            doc = etree.parse(path)
        except (OSError, etree.XMLSyntaxError) as e:
            print(f"{path}: not well-formed XML: {e}")
            failed = True
            continue
        if not schema.validate(doc):
            for e in schema.error_log:
                print(f"{path}:{e.line}: {e.message}")
            failed = True
            continue  # counts are read from attributes the schema vouches for
        problems = count_problems(path, doc.getroot())
        for p in problems:
            print(p)
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
