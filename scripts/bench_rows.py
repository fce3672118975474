"""The benchmarks of one Google Benchmark JSON file, for the device scripts' tables.

rows(path, what, header) prints a markdown table's header row (the column names in header) and
returns the benchmarks that ran, for the caller to print a row each; a missing or unreadable
file ends the script with one line naming `what`, and a benchmark that reported an error is
printed as a row with its message instead of being returned (its counters are absent)."""
import json
import sys


def rows(path, what, header):
    try:
        benchmarks = json.load(open(path))["benchmarks"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"no {what}: {e}")
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    ran = []
    for b in benchmarks:
        if b.get("error_occurred"):
            print(f"| {b['name']} | error: {b.get('error_message', '')} |")
        else:
            ran.append(b)
    return ran


def short_name(b):
    """The benchmark's name without Google Benchmark's /iterations:N/manual_time suffix."""
    return b["name"].split("/iterations")[0]
