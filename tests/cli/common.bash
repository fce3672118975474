# Shared by the tests/cli/*.sh scripts (not a test itself: the glob takes *.sh only).
# Usage in a script:  source "$(dirname "$0")/common.bash" "$@"
set -euo pipefail
TPBENCH=$(realpath "$1")
SCRATCH=$2
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH"
SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_rc WANT CMD...: runs CMD, stdout+stderr to $SCRATCH/last.out, checks the exit status.
expect_rc() {
  local want=$1; shift
  set +e
  "$@" >"$SCRATCH/last.out" 2>&1
  local rc=$?
  set -e
  if [[ $rc -ne $want ]]; then
    cat "$SCRATCH/last.out" >&2
    fail "expected exit $want, got $rc from: $*"
  fi
}

# The single run folder under a results root.
run_dir_of() {
  local dirs=("$1"/*/)
  [[ ${#dirs[@]} -eq 1 && -d ${dirs[0]} ]] || fail "expected one run folder in $1, found ${#dirs[@]}"
  echo "${dirs[0]%/}"
}

# Fault drills: a run started with `TPB_TEST_MARK=$MARK` in its environment passes it to every
# rank it starts (and theirs), so what is left of it can be found by environment, whatever its
# command line or parent. marked_pids: the live processes that carry $MARK.
MARK="tpb-cli-$$-$RANDOM"

# environ_has PID ENTRY: the process's environment holds ENTRY ("NAME=value") exactly.
# Builtins only: no fork per process, as marked_pids asks it of every process.
environ_has() {
  local env=() IFS=$'\n'
  { mapfile -d '' -t env <"/proc/$1/environ"; } 2>/dev/null || return 1
  [[ $'\n'"${env[*]}"$'\n' == *$'\n'"$2"$'\n'* ]]
}

marked_pids() {
  local p
  for p in /proc/[0-9]*; do
    environ_has "${p#/proc/}" "TPB_TEST_MARK=$MARK" && echo "${p#/proc/}"
  done
  return 0
}

# expect_nothing_left CONTROLLER_PID WHAT: no process of the drill is alive (ranks die with
# their controller, PR_SET_DEATHSIG, within a moment) and no POSIX shared memory named after
# the controller's groups ("tpb<pid>-g<n>-...") is left in /dev/shm.
expect_nothing_left() {
  local controller=$1 what=$2 left="" shm=""
  for _ in $(seq 50); do
    left=$(marked_pids)
    [[ -z $left ]] && break
    sleep 0.1
  done
  if [[ -n $left ]]; then
    ps -o pid,ppid,stat,args -p "$(echo $left | tr ' ' ,)" >&2 || true
    fail "$what: processes left running: $left"
  fi
  shm=$(compgen -G "/dev/shm/tpb${controller}-g*" || true)
  [[ -z $shm ]] || fail "$what: shared memory left in /dev/shm: $shm"
}

# Drills that start a run in the background (`pid`, its output in $SCRATCH/<basename ROOT>.out):
# first_case_in_flight ROOT [SETTLE_S]: waits until the first case's four ranks are up, then
# SETTLE_S (into the measurement), and checks that no record is written yet.
first_case_in_flight() {
  local root=$1
  for _ in $(seq 500); do
    compgen -G "$root/*/logs/*rank3.log" >/dev/null && break
    sleep 0.02
  done
  sleep "${2:-0.2}"
  local f
  f=$(compgen -G "$root/*/results.jsonl" | head -1 || true)
  [[ -z $f || ! -s $f ]] || fail "$root: the first case ended before the fault; the drill needs it in flight"
}

# finish ROOT WANT_RC: waits for the run, checks its exit status and that nothing of it is
# left; sets `run` to its run folder.
finish() {
  local rc
  set +e
  while :; do
    wait "$pid"; rc=$?
    # 147 = 128 + SIGSTOP: under job control (set -m) wait also reports a stop of the job (a
    # test that stopped and continued the controller, mpirun_rank_faults.sh): wait for its end.
    [[ $rc -eq 147 ]] && kill -0 "$pid" 2>/dev/null && { sleep 0.05; continue; }
    break
  done
  set -e
  [[ $rc -eq $2 ]] || { cat "$SCRATCH/$(basename "$1").out" >&2; fail "$1: exit $rc, expected $2"; }
  expect_nothing_left "$pid" "$1"
  run=$(run_dir_of "$1")
}

# require_mpirun: skips the test (77) without mpirun or an MPI-built tpbench; as root, Open MPI
# wants its two variables to start at all.
require_mpirun() {
  command -v mpirun >/dev/null || { echo "skipped: mpirun is not installed (Debian: openmpi-bin)"; exit 77; }
  "$TPBENCH" version | grep -q '^mpi: *yes' || { echo "skipped: this tpbench was built without MPI"; exit 77; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# smoke_tp2 OUT: ci-smoke's own settings (1 repetition a case, latency informational) on its
# TP 2 shm cases only, a run of seconds, written to OUT.
smoke_tp2() {
  python3 - "$SOURCE_DIR/scenarios/ci-smoke.json" "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["sweep"].update(tp=[2], allreduce=["shm"])
json.dump(s, open(sys.argv[2], "w"))
PY
}
