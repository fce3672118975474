# Issue 37, finding 4: the report holds the contract of tpbench's C++ commands. Bad input
# (invalid UTF-8, NaN/Infinity, a number past a double, a key twice, nesting past 64, a wrong
# type) is one line naming the file, the line and the rule, exit 2 (a traceback and exit 1,
# or accepted with exit 0, before); a file it cannot write (a full or read-only disk) is one
# line naming the file and the reason, exit 1, leaving each file whole or as it was (56 lines
# with two tracebacks and a cut PNG before); Ctrl-C is one line, 128 + the signal. A
# `tpbench run` whose own report failed says so in its exit status and in run.json's
# summary.report (it exited 0); one that cannot make a report here (no python3) keeps its
# status and says that instead.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
set -m  # a background report leads its own process group, as a terminal's job does

fixture() {
  rm -rf "$1" && mkdir -p "$1"
  cp tests/data/results_fixture/results.jsonl tests/data/results_fixture/run.json "$1/"
}

# one_line WHAT: the command's output is one line, without a traceback.
one_line() {
  ! grep -q "Traceback" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "$1: a traceback"; }
  [[ $(wc -l <"$SCRATCH/last.out") -eq 1 ]] || { cat "$SCRATCH/last.out"; fail "$1: more than one line"; }
}

# nothing_cut DIR: every PNG there is whole and no temporary file is left.
nothing_cut() {
  python3 - "$1" <<'PY' || fail "$1: a cut file or a temporary one left"
import glob, os, sys
for path in glob.glob(os.path.join(sys.argv[1], "*.png")):
    data = open(path, "rb").read()
    assert data.endswith(b"IEND\xaeB`\x82"), f"{path}: cut short ({len(data)} bytes)"
left = glob.glob(os.path.join(sys.argv[1], ".*.tmp-*"))
assert not left, left
PY
}

# bad_line NAME LINE PYTHON: the fixture with results line LINE replaced by PYTHON's value of
# `line` (the line as bytes), which the report must refuse.
bad_line() {
  fixture "$SCRATCH/$1"
  python3 - "$SCRATCH/$1/results.jsonl" "$2" "$3" <<'PY'
import sys
path, number, statement = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = open(path, "rb").read().split(b"\n")
line = lines[number - 1]
exec(statement)
lines[number - 1] = line
open(path, "wb").write(b"\n".join(lines))
PY
}

# refused NAME WHAT...: `tpbench report` exits 2 with one line holding each WHAT, writes nothing.
refused() {
  local dir="$SCRATCH/$1"
  shift
  expect_rc 2 "$TPBENCH" report "$dir"
  one_line "$dir"
  for what in "$@"; do
    grep -qF -- "$what" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "$dir: the line does not say: $what"; }
  done
  [[ ! -e "$dir/report.html" ]] || fail "$dir: a report was written from bad input"
}

bad_line utf8 5 'line = line.replace(b"\"case_id\"", b"\"case_id\xff\"", 1)'
refused utf8 "results.jsonl:5: not valid JSON (not UTF-8: byte 0xff at column"
bad_line infinity 6 'import re; line = re.sub(rb"\"p50\":[0-9.e+-]+", b"\"p50\":Infinity", line, count=1)'
refused infinity "results.jsonl:6: not valid JSON (Infinity: JSON has no NaN or Infinity)"
bad_line nan 3 'line = b"{\"nan\": NaN, " + line[1:]'
refused nan "results.jsonl:3: not valid JSON (NaN: JSON has no NaN or Infinity)"
bad_line overflow 4 'line = b"{\"big\": 1e400, " + line[1:]'
refused overflow "results.jsonl:4: not valid JSON (the number 1e400 is too large for a double)"
bad_line long-integer 4 'line = b"{\"big\": " + b"9" * 5000 + b", " + line[1:]'
refused long-integer "results.jsonl:4: not valid JSON (the number 999" "is too large for a double"
bad_line duplicate 7 'line = b"{\"status\": \"ok\", " + line[1:]'
refused duplicate "results.jsonl:7: $: not valid JSON (duplicate key \"status\")"
bad_line deep 8 'line = b"{\"deep\": " + b"[" * 100 + b"]" * 100 + b", " + line[1:]'
refused deep "results.jsonl:8: \$.deep" "nesting deeper than 64 levels"
bad_line deeper 8 'line = b"{\"deep\": " + b"[" * 100000 + b"]" * 100000 + b", " + line[1:]'
refused deeper "results.jsonl:8: not valid JSON (nesting deeper than 64 levels)"
bad_line nul 9 'line = b"{\"note\": \"a\\u0000b\", " + line[1:]'
refused nul "results.jsonl:9: \$.note: not valid JSON (a string holds \\u0000 (NUL))"
bad_line wrong-type 10 'import json; r = json.loads(line); r["latency"] = {"p50": "fast"}; line = json.dumps(r).encode()'
refused wrong-type "results.jsonl:10: \$.latency.p50: expected number or null, got string \"fast\""
fixture "$SCRATCH/run-json"
sed -i '0,/"fixture": true/s//"fixture": Infinity/' "$SCRATCH/run-json/run.json"
grep -q Infinity "$SCRATCH/run-json/run.json" || fail "the run.json edit did not apply"
refused run-json "run.json:" "not valid JSON (Infinity: JSON has no NaN or Infinity)"

# A full disk, then a read-only one: a 640 KiB tmpfs holds the fixture (300 KiB) and a few of
# the plots. Where mounting is not allowed, RLIMIT_FSIZE (Python ignores SIGXFSZ) makes the
# first large write fail the same way ("File too large").
disk="$SCRATCH/disk"
mkdir -p "$disk"
if mount -t tmpfs -o size=640k tmpfs "$disk" 2>"$SCRATCH/mount.err"; then
  trap 'umount "$disk" 2>/dev/null || true' EXIT
  fixture "$disk/full"
  expect_rc 1 "$TPBENCH" report "$disk/full"
  one_line "full disk"
  grep -q "tpbench report: failed: cannot write $disk/full/.*\.png (No space left on device); the report is not complete" \
    "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "full disk: the file and the reason are not named"; }
  nothing_cut "$disk/full"
  rm -f "$disk"/full/*.png
  mount -o remount,ro "$disk"
  expect_rc 1 "$TPBENCH" report "$disk/full"
  one_line "read-only disk"
  grep -q "failed: cannot write $disk/full/.*\.png (Read-only file system)" "$SCRATCH/last.out" ||
    { cat "$SCRATCH/last.out"; fail "read-only disk: the file and the reason are not named"; }
  expect_rc 1 "$TPBENCH" report "$disk/full" --out "$disk/elsewhere"
  one_line "read-only disk, --out"
  grep -q "failed: cannot create the folder $disk/elsewhere (Read-only file system)" "$SCRATCH/last.out" ||
    { cat "$SCRATCH/last.out"; fail "read-only disk: the folder is not named"; }
  umount "$disk"
  trap - EXIT
  echo "full and read-only disk: tmpfs"
else
  fixture "$disk/full"
  (ulimit -f 48 && expect_rc 1 "$TPBENCH" report "$disk/full")
  one_line "file size limit"
  grep -q "failed: cannot write $disk/full/.*\.png (File too large)" "$SCRATCH/last.out" ||
    { cat "$SCRATCH/last.out"; fail "file size limit: the file and the reason are not named"; }
  nothing_cut "$disk/full"
  echo "full disk: RLIMIT_FSIZE (cannot mount a tmpfs: $(head -1 "$SCRATCH/mount.err")); read-only: not run here"
fi

# Ctrl-C: the terminal signals the whole job; the report unwinds, says so, exits 130.
fixture "$SCRATCH/interrupted"
"$TPBENCH" report "$SCRATCH/interrupted" >"$SCRATCH/last.out" 2>&1 &
job=$!
for _ in $(seq 200); do
  compgen -G "$SCRATCH/interrupted/*.png" >/dev/null && break
  sleep 0.02
done
kill -INT -- -"$job"
set +e
wait "$job"
set -e
for _ in $(seq 100); do pgrep -f "make_report.py $SCRATCH/interrupted" >/dev/null || break; sleep 0.05; done
grep -q "tpbench report: interrupted by SIGINT; the report is not complete" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "Ctrl-C: no line saying so"; }
one_line "Ctrl-C"
nothing_cut "$SCRATCH/interrupted"

# tpbench run: a report that failed fails the run, and run.json says why.
cat >"$SCRATCH/ok.json" <<'JSON'
{"schema": 1, "name": "fine", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [1, 2], "message_bytes": [64, 128]}, "measure": {"iterations": 2}}
JSON
# summary_report RUN_DIR: run.json's summary.report and exit_code, as "status exit_code message".
summary_report() {
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1] + "/run.json"))["summary"]; r = s["report"]
print(r["status"], s["exit_code"], r["message"])' "$1"
}
# The report's files (not the ranks' shared memory) limited to 48 KiB: the first plot fails.
printf '#!/bin/sh\nulimit -f 48\nexec python3 "$@"\n' >"$SCRATCH/python-small-disk"
chmod +x "$SCRATCH/python-small-disk"
TPB_PYTHON="$SCRATCH/python-small-disk" expect_rc 1 "$TPBENCH" run "$SCRATCH/ok.json" --results-dir "$SCRATCH/r-failed"
run=$(run_dir_of "$SCRATCH/r-failed")
grep -q "^cases: 4 ok, 0 failed" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "the cases did not pass"; }
grep -q "^report: failed (exit 1; see above), so the run exits 1; retry with \`tpbench report $run\`" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "run: the report's failure is not said"; }
! grep -q "Traceback" "$SCRATCH/last.out" || fail "run: a traceback"
[[ $(summary_report "$run") == "failed 1 tpbench report: failed: cannot write $run/"*" (File too large); the report is not complete" ]] ||
  fail "run.json: $(summary_report "$run")"

expect_rc 0 "$TPBENCH" run "$SCRATCH/ok.json" --results-dir "$SCRATCH/r-written"
[[ $(summary_report "$(run_dir_of "$SCRATCH/r-written")") == "written 0 None" ]] ||
  fail "run.json: $(summary_report "$(run_dir_of "$SCRATCH/r-written")")"

# No python3 here: the report cannot be made on this machine, which fails nothing.
TPB_PYTHON="$SCRATCH/no-such-python" expect_rc 0 "$TPBENCH" run "$SCRATCH/ok.json" --results-dir "$SCRATCH/r-unavailable"
run=$(run_dir_of "$SCRATCH/r-unavailable")
grep -q "^report: not made on this machine (see above); the run's exit status stands" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "run without python3: not said"; }
[[ $(summary_report "$run") == "unavailable 0 tpbench report: error: cannot run '$SCRATCH/no-such-python'"* ]] ||
  fail "run.json: $(summary_report "$run")"
echo ok
