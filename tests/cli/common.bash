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
