#!/usr/bin/env bash
# Issue 19: ranks started by mpirun (`tpbench run --launcher mpirun`) fail only their case when
# one dies or hangs, and nothing of the job is left. Four ranks on the CPU (oversubscribed),
# shm allreduce, a first case of about a second into which the fault lands, then small cases
# that must pass. Rows:
#   KILL  rank 2 SIGKILLed: its control connection closes; the case fails naming rank 2, with
#         mpirun's own account of the death in the error; the job is ended.
#   KILL_UNSEEN  the same while the controller is stopped, until mpirun has ended the other
#         ranks: every connection has closed by the time it looks, and it must still name
#         rank 2, the one mpirun names (it named rank 0, the lowest, before; on a loaded
#         machine the plain KILL row met the same race now and then).
#   STOP  rank 2 SIGSTOPped: the case times out naming the silent ranks; the stopped rank on
#         this host is killed by pid although mpirun cannot end it.
#   CONTROLLER  the controller SIGKILLed mid-case: no process of the job is left, and
#         --resume (keeping the run's launcher) finishes the run.
#   TOKEN a connection to the controller's TCP port with a wrong token is closed unheard, and
#         the run is not disturbed by it.
# Every row: exit 1 or 0 as the records say, no process of the run left (found by an
# environment mark that mpirun passes to its ranks, tests/cli/common.bash), nothing in /dev/shm.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
set -m
require_mpirun

iterations=300
python3 - "$SCRATCH" "$iterations" <<'PY'
import json, sys
for timeout in (60, 8):
    json.dump({"schema": 1, "name": "mpirun-drill", "workload": "allreduce", "device": "cpu",
               "sweep": {"tp": [4], "allreduce": ["shm"], "dtype": ["f32"], "message_bytes": [4194304, 1024, 1028]},
               "measure": {"warmup": 1, "iterations": int(sys.argv[2]), "timeout_s": timeout}, "checks": []},
              open(f"{sys.argv[1]}/drill-{timeout}.json", "w"))
PY

start() {
  TPB_TEST_MARK=$MARK "$TPBENCH" run "$2" --launcher mpirun --launcher-args=--oversubscribe --no-report \
    --results-dir "$1" >"$SCRATCH/$(basename "$1").out" 2>&1 &
  pid=$!
}

# rank_of_job RANK: the marked process that is that rank of the job (mpirun's variable).
rank_of_job() {
  local p
  for _ in $(seq 500); do
    for p in $(marked_pids); do
      environ_has "$p" "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return 0; }
    done
    sleep 0.02
  done
  fail "no rank $1 of an mpirun job carries the mark"
}

# finish_job ROOT WANT_RC: finish (common.bash), and no mpirun of the run is left.
finish_job() {
  finish "$1" "$2"
  [[ -z $(pgrep -f "mpirun.*$(basename "$1")" || true) ]] || fail "$1: an mpirun is left"
}

for row in KILL KILL_UNSEEN STOP; do
  root="$SCRATCH/rank-$row"
  timeout_s=60
  [[ $row == STOP ]] && timeout_s=8
  start "$root" "$SCRATCH/drill-$timeout_s.json"
  first_case_in_flight "$root" 0.3
  if [[ $row == KILL_UNSEEN ]]; then
    others="$(rank_of_job 0) $(rank_of_job 1) $(rank_of_job 3)"
    kill -STOP "$pid"
    kill -KILL "$(rank_of_job 2)"
    for _ in $(seq 100); do  # until mpirun has ended the other ranks (at most 10 s)
      alive=0
      for p in $others; do kill -0 "$p" 2>/dev/null && alive=1; done
      [[ $alive == 0 ]] && break
      sleep 0.1
    done
    kill -CONT "$pid"
  else
    kill -"$row" "$(rank_of_job 2)"
  fi
  finish_job "$root" 1
  case $row in
    KILL|KILL_UNSEEN) want="rank 2: closed its control connection" ;;
    STOP) want="timeout after 8.0 s waiting for ranks 0, 1, 2, 3: rank 2 is stopped (process state T)" ;;
  esac
  python3 - "$run" "$want" "$timeout_s" "$row" <<'PY' || fail "rank $row: wrong records"
import json, sys
run, want, timeout, row = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
recs = [json.loads(l) for l in open(run + "/results.jsonl")]
first = recs[0]
assert first["status"] == "failed", first["status"]
assert first["error"].startswith(want), first["error"].split("\n")[0]
assert first["failed_ranks"] == [2], first["failed_ranks"]
assert first["wall_s"] < timeout + 5, ("detected late", first["wall_s"])
if row.startswith("KILL"):  # mpirun's account of the death is in the error
    assert "signal 9" in first["error"], first["error"]
assert first["launch_command"][:3] == ["mpirun", "-np", "4"], first["launch_command"]
assert [r["status"] for r in recs[1:]] == ["ok", "ok"], [r["status"] for r in recs]
# The later cases ran in a fresh job: other pids.
assert not set(recs[1]["pids"]) & set(first["pids"]), (first["pids"], recs[1]["pids"])
print(f"row rank-{row}: {first['error'].splitlines()[0]} | detected after {first['wall_s']:.1f} s")
PY
done

# CONTROLLER: the controller SIGKILLed mid-case (nothing of it can clean up): mpirun dies with
# it (PR_SET_PDEATHSIG) and the ranks with mpirun, or when the controller's connection closes;
# nothing of the job may be left. Then --resume, which keeps the run's launcher, finishes it.
root="$SCRATCH/controller-KILL"
start "$root" "$SCRATCH/drill-60.json"
first_case_in_flight "$root" 0.3
kill -KILL "$pid"
set +e; wait "$pid"; set -e
killed=$pid
for _ in $(seq 100); do
  [[ -z $(marked_pids) ]] && break
  sleep 0.1
done
left=$(marked_pids)
[[ -z $left ]] || { ps -o pid,ppid,stat,args -p "$(echo $left | tr ' ' ,)" >&2; fail "controller KILL: left running: $left"; }
run=$(run_dir_of "$root")
expect_rc 0 env TPB_TEST_MARK=$MARK "$TPBENCH" run --resume "$run" --no-report
grep -q "^\[1/3\] .* ok " "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "controller KILL: the resume did not run the case cut short"; }
expect_nothing_left "$killed" "controller KILL, then --resume"
python3 - "$run" <<'PY' || fail "controller KILL: the resumed run is not whole, or not under mpirun"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
assert [r["status"] for r in recs] == ["ok"] * 3, [(r["status"], r.get("error")) for r in recs]
assert all(r["launch_command"][0] == "mpirun" for r in recs), [r.get("launch_command") for r in recs]
assert "--launcher mpirun" in recs[0]["reproduce"], recs[0]["reproduce"]
PY
echo "row controller-KILL: no process left; resumed under mpirun"

# TOKEN: while the first case runs, connect to the controller's port (from rank 0's
# environment) with a wrong token; the controller must close the connection without a word,
# and the run must end as if nothing happened.
root="$SCRATCH/token"
start "$root" "$SCRATCH/drill-60.json"
first_case_in_flight "$root" 0.3
addr=$(tr '\0' '\n' <"/proc/$(rank_of_job 0)/environ" | sed -n 's/^TPB_CONTROL_ADDR=//p')
[[ -n $addr ]] || fail "rank 0 has no TPB_CONTROL_ADDR"
python3 - "$addr" <<'PY' || fail "a connection with a wrong token was not closed unheard"
import json, socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall((json.dumps({"type": "hello", "rank": 1, "pid": 1, "token": "0" * 32, "host": "x"}) + "\n").encode())
assert s.recv(4096) == b"", "the controller answered a connection with a wrong token"
print("TOKEN: a hello with a wrong token was closed unheard")
PY
finish_job "$root" 0
python3 - "$run" <<'PY' || fail "token: the run was disturbed"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
assert [r["status"] for r in recs] == ["ok"] * 3, [(r["status"], r.get("error")) for r in recs]
PY
echo ok
