#!/usr/bin/env bash
# Issue 17, part 8: the fault matrix. Each row plants one fault in a real `tpbench run` (four
# rank processes on the CPU, shm allreduce, cases of about a second) and asserts what a user
# relies on: the fault is detected within the case's timeout + 5 s, the right rank is named,
# the exit status is the documented one, no process of the run is left (found by an
# environment mark, tests/cli/common.bash) and nothing of it in /dev/shm, and every finished
# record is intact and none is duplicated (after a --resume where the row needs one).
#
# Rows: a rank SIGKILLed, SIGSTOPped, crashing (SIGSEGV) inside an allreduce; the controller
# SIGKILLed, then --resume; a truncated last record, then --resume; a full disk (a 64 KiB
# tmpfs; where mounting is not allowed the row says so and the unit test results_durability
# covers it with RLIMIT_FSIZE); two writers on one run folder; the control socket's name
# already taken. SIGINT/SIGTERM of the controller: tests/cli/interrupt_ends_with_a_summary.sh.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
set -m       # each background run leads its own process group
ulimit -c 0  # the planted SIGSEGV must not leave a core file

# drill.json: four cases of about a second each (a fault lands inside one; a controller is
# killed between records). drill-tail.json: one such case, where the rank faults land, then
# three small ones that must still pass within the row's timeout. A sanitized build (ASan
# makes the sums several times slower) runs fewer iterations.
iterations=300
"$TPBENCH" --version | grep -q -- "-fsanitize" && iterations=60
python3 - "$SCRATCH" "$iterations" <<'PY'
import json, sys
def drill(sizes):
    return {"schema": 1, "name": "fault-drill", "workload": "allreduce", "device": "cpu",
            "model": {"preset": "tiny-dsv3", "weights": "synthetic", "seed": 7},
            "sweep": {"tp": [4], "allreduce": ["shm"], "dtype": ["f32"], "message_bytes": sizes},
            "measure": {"warmup": 1, "iterations": int(sys.argv[2]), "timeout_s": 60}, "checks": []}
json.dump(drill([4194304, 4194300, 4194296, 4194292]), open(sys.argv[1] + "/drill.json", "w"))
json.dump(drill([4194304, 1024, 1028, 1032]), open(sys.argv[1] + "/drill-tail.json", "w"))
PY

# start ROOT [SCENARIO]: a marked run in the background; $pid is its controller, its output in
# $SCRATCH/<basename of ROOT>.out (not under ROOT, which may be a full disk).
start() {
  TPB_TEST_MARK=$MARK "$TPBENCH" run "${2:-$SCRATCH/drill.json}" --no-report --results-dir "$1" \
    >"$SCRATCH/$(basename "$1").out" 2>&1 &
  pid=$!
}

# rank_pid CONTROLLER RANK: the rank process of that rank among the controller's children.
rank_pid() {
  local c
  for c in $(pgrep -P "$1"); do
    environ_has "$c" "RANK=$2" && { echo "$c"; return 0; }
  done
  fail "no rank $2 among the children of $1"
}

# records RUN PYTHON_ASSERTIONS: every line of results.jsonl is a whole JSON record, no case
# is recorded twice, and the assertions hold over `recs` (in file order) and `planned`.
records() {
  python3 - "$1" "$2" <<'PY'
import json, sys
run, check = sys.argv[1], sys.argv[2]
planned = [c["case_id"] for c in json.load(open(run + "/run.json"))["cases"]]
lines = open(run + "/results.jsonl").read().split("\n")
assert lines[-1] == "", "the last record is not a whole line"
recs = [json.loads(l) for l in lines[:-1]]
ids = [r["case_id"] for r in recs]
assert len(ids) == len(set(ids)), f"a case recorded twice: {ids}"
exec(check)
PY
}

# Rows 1-3: a rank killed, stopped, crashing while the ranks are inside their allreduces.
for row in KILL STOP SEGV; do
  root="$SCRATCH/rank-$row"
  timeout_s=60
  [[ $row == STOP ]] && timeout_s=15  # the later (small) cases must fit in it on a loaded runner too
  sed "s/\"timeout_s\": 60/\"timeout_s\": $timeout_s/" "$SCRATCH/drill-tail.json" >"$SCRATCH/drill-$row.json"
  # Under ASan (the asan preset) its SEGV handler would turn the signal into a report and
  # an abort: the row is about a rank that dies of SIGSEGV, as an uninstrumented one does.
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0 start "$root" "$SCRATCH/drill-$row.json"
  first_case_in_flight "$root"
  victim=2
  kill -"$row" "$(rank_pid "$pid" $victim)"
  finish "$root" 1
  case $row in
    KILL) want="rank 2: killed by signal 9 (SIGKILL)" ;;
    SEGV) want="rank 2: killed by signal 11 (SIGSEGV)" ;;
    # Inside a collective, or (a loaded runner: the stop landed during the communicator's
    # setup) in a bootstrap all_gather: either way the others are named as waiting.
    STOP) want="timeout after 15.0 s waiting for rank 2: rank 2 is stopped (process state T: SIGSTOP or a debugger); ranks 0, 1, 3 wait in" ;;
  esac
  records "$run" "
first = recs[0]
assert first['status'] == 'failed' and first['failed_ranks'] == [$victim], first
assert first['error'].split('\n')[0].startswith('''$want'''), first['error'].split('\n')[0]
assert first['wall_s'] < $timeout_s + 5, ('detected late', first['wall_s'])
assert [r['status'] for r in recs[1:]] == ['ok'] * (len(planned) - 1), [r['status'] for r in recs]
assert sorted(ids) == sorted(planned)
" || fail "rank $row: wrong record"
  echo "row rank-$row: $(python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(r['error'].splitlines()[0], '| detected after', r['wall_s'], 's')" "$run/results.jsonl")"
done

# Row 4: the controller SIGKILLed (nothing of it can clean up), then --resume.
root="$SCRATCH/controller-KILL"
start "$root"
for _ in $(seq 500); do
  f=$(compgen -G "$root/*/results.jsonl" | head -1 || true)
  [[ -n $f && -s $f ]] && break
  sleep 0.02
done
kill -KILL "$pid"
set +e; wait "$pid"; set -e
run=$(run_dir_of "$root")
killed=$pid
expect_rc 0 env TPB_TEST_MARK=$MARK "$TPBENCH" run --resume "$run" --no-report
grep -q "([1-9][0-9]* resumed from the earlier run)" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "controller KILL: the finished records were not kept"; }
expect_nothing_left "$killed" "controller KILL, then --resume"  # the resume swept the dead controller's /dev/shm
records "$run" "
assert sorted(ids) == sorted(planned) and all(r['status'] == 'ok' for r in recs), [(r['case_id'], r['status']) for r in recs]
" || fail "controller KILL: the resumed run is not whole"
echo "row controller-KILL: resumed, $(wc -l <"$run/results.jsonl") records, each case once"

# Row 5: a truncated last record (a crash mid-write), then --resume.
truncate -s -7 "$run/results.jsonl"
expect_rc 0 "$TPBENCH" run --resume "$run" --no-report
[[ -s $run/results.jsonl.damaged ]] || fail "truncated record: no copy of the damaged line"
records "$run" "
assert sorted(ids) == sorted(planned) and all(r['status'] == 'ok' for r in recs)
" || fail "truncated record: the resumed run is not whole"
echo "row truncated-record: damaged line kept in results.jsonl.damaged, the case run again"

# Row 6: two writers on one run folder.
truncate -s 0 "$run/results.jsonl"
TPB_TEST_MARK=$MARK "$TPBENCH" run --resume "$run" --no-report >"$SCRATCH/writer1.out" 2>&1 &
pid=$!
for _ in $(seq 500); do
  [[ -s $run/.tpbench.lock ]] && break
  sleep 0.01
done
expect_rc 2 "$TPBENCH" run --resume "$run" --no-report
grep -q "pid $pid" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "two writers: the second does not name the holder's pid $pid"; }
set +e; wait "$pid"; rc=$?; set -e
[[ $rc -eq 0 ]] || { cat "$SCRATCH/writer1.out"; fail "two writers: the first exited $rc"; }
expect_nothing_left "$pid" "two writers"
records "$run" "
assert sorted(ids) == sorted(planned)
" || fail "two writers: records lost or duplicated"
echo "row two-writers: the second exits 2 naming pid $pid; the first completes"

# Row 7: the control socket's name already taken. The controller's pid is known before it
# starts (exec keeps the shell's), so a squatter can hold its first two group names.
root="$SCRATCH/squatted"
mkdir -p "$root"
TPB_TEST_MARK=$MARK bash -c '
  python3 -c "
import socket, sys, time
held = []
for g in (0, 1):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(\"\\0tpb%s-g%d-ctl\" % (sys.argv[1], g)); s.listen(1); held.append(s)
open(sys.argv[2], \"w\").close()
time.sleep(30)
" $$ "$1/squatting" &
  for _ in $(seq 500); do [[ -e $1/squatting ]] && break; sleep 0.01; done
  exec "$0" run "$2" --no-report --results-dir "$1"
' "$TPBENCH" "$root" "$SCRATCH/drill.json" >"$SCRATCH/squatted.out" 2>&1 &
pid=$!
set +e; wait "$pid"; rc=$?; set -e
[[ $rc -eq 0 ]] || { cat "$SCRATCH/squatted.out"; fail "squatted control socket: exit $rc"; }
[[ -e $root/squatting ]] || fail "squatted control socket: the squatter never held the names"
kill $(marked_pids) 2>/dev/null || true  # the squatter (marked too)
expect_nothing_left "$pid" "squatted control socket"
records "$(run_dir_of "$root")" "assert sorted(ids) == sorted(planned) and all(r['status'] == 'ok' for r in recs)" ||
  fail "squatted control socket: not every case ran"
grep -q "tpb$pid-g2-rank0.log" <(ls "$(run_dir_of "$root")/logs") || fail "squatted control socket: the first free name was not used"
echo "row squatted-control-socket: groups g0 and g1 taken, the run used g2 and passed"

# Row 8: a full disk under the run folder.
tiny="$SCRATCH/tiny-disk"
mkdir -p "$tiny"
if mount -t tmpfs -o size=64k tmpfs "$tiny" 2>"$SCRATCH/mount.err"; then
  trap 'umount "$tiny" 2>/dev/null || true' EXIT
  start "$tiny/res"
  finish "$tiny/res" 1
  grep -q "No space left on device" "$SCRATCH/res.out" ||
    { cat "$SCRATCH/res.out"; fail "full disk: the error does not name the errno"; }
  compgen -G "$run/*.tmp.*" >/dev/null && fail "full disk: a temp file was left: $(ls "$run")"
  # Whole records only (the check inside `records`), however many fitted: where the disk
  # filled (a record, run.json's summary, a log) depends on the records' size.
  records "$run" "assert len(recs) <= len(planned)" || fail "full disk: a damaged or duplicated record"
  mount -o remount,size=8m "$tiny"
  expect_rc 0 env TPB_TEST_MARK=$MARK "$TPBENCH" run --resume "$run" --no-report
  records "$run" "assert sorted(ids) == sorted(planned)" || fail "full disk: the resumed run is not whole"
  echo "row full-disk: $(grep -m1 "No space left on device" "$SCRATCH/res.out" | cut -c1-160); records intact, resumed after space came back"
else
  echo "row full-disk: not run here: cannot mount a tmpfs ($(head -1 "$SCRATCH/mount.err")); results_durability_test plants ENOSPC-like failures with RLIMIT_FSIZE"
fi
echo ok
