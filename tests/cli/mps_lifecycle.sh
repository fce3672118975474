# tpbench mps start/status/stop/reap against a fake control program (TPB_MPS_CONTROL,
# tests/data/fake-mps-control.sh, as tests/unit/mps_test.cpp uses): each action prints one line and exits as its usage
# says, a daemon that `start` started is gone after `stop`, the daemon of a dead tpbench run
# is gone after `reap`, and no fake daemon process is left when the script ends.
source "$(dirname "$0")/common.bash" "$@"

# Pipe folders become Unix-socket paths (108 bytes at most): keep them short, under /tmp.
tmp=$(mktemp -d /tmp/tpb-mps-cli-XXXXXX)

# The fake daemons of this script: "bash -c ... fake-mps-daemon <pipe folder under $tmp>".
our_daemons() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q "fake-mps-daemon $tmp/" && echo "${p#/proc/}"
  done
  return 0
}
cleanup() {
  local pid
  for pid in $(our_daemons); do kill -KILL -- "-$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

fake=$tmp/fake-mps-control
cp "$(dirname "$0")/../data/fake-mps-control.sh" "$fake"
chmod +x "$fake"
export TPB_MPS_CONTROL=$fake
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

# expect_line PATTERN: the last command printed exactly one line, matching PATTERN (grep -E).
expect_line() {
  [[ $(wc -l <"$SCRATCH/last.out") -eq 1 ]] || { cat "$SCRATCH/last.out" >&2; fail "expected one line"; }
  grep -Eq "$1" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "expected a line matching '$1'"; }
}
alive() { kill -0 "$1" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]; }

# Usage errors.
expect_rc 0 "$TPBENCH" mps --help
expect_rc 2 "$TPBENCH" mps
expect_rc 2 "$TPBENCH" mps restart --pipe-dir "$tmp/p"
expect_rc 2 "$TPBENCH" mps start
expect_rc 2 "$TPBENCH" mps stop --pipe-dir "$tmp/p" --require

# start / status / stop.
pipe=$tmp/pipe
expect_rc 1 "$TPBENCH" mps status --pipe-dir "$pipe"
expect_line "^tpbench mps status: MPS daemon at $pipe is not reachable$"
expect_rc 0 "$TPBENCH" mps start --pipe-dir "$pipe" --log-dir "$tmp/log"
daemon=$(<"$pipe/daemon.pid")
expect_line "^tpbench mps start: started an MPS control daemon \(pid $daemon\), pipe folder $pipe, log folder $tmp/log$"
alive "$daemon" || fail "the daemon is not running after start"
[[ $(our_daemons) == "$daemon" ]] || fail "expected one fake daemon ($daemon), found: $(our_daemons)"
expect_rc 0 "$TPBENCH" mps status --pipe-dir "$pipe"
expect_line "is reachable \(pid $daemon\)$"
expect_rc 0 "$TPBENCH" mps start --pipe-dir "$pipe"
expect_line "already reachable at $pipe: left as it is$"
[[ $(our_daemons) == "$daemon" ]] || fail "a second start started another daemon"
expect_rc 0 "$TPBENCH" mps stop --pipe-dir "$pipe"
expect_line "^tpbench mps stop: MPS daemon at $pipe \(pid $daemon\) stopped \(quit\); removed $pipe$"
alive "$daemon" && fail "the daemon is still running after stop"
[[ -e $pipe ]] && fail "stop left the pipe folder that start created"
expect_rc 0 "$TPBENCH" mps stop --pipe-dir "$pipe"
expect_line "no MPS daemon was running at $pipe$"

# A pipe folder that existed before start stays after stop (only our record goes).
mkdir -p "$tmp/kept"
expect_rc 0 "$TPBENCH" mps start --pipe-dir "$tmp/kept"
expect_rc 0 "$TPBENCH" mps stop --pipe-dir "$tmp/kept"
[[ -d $tmp/kept && ! -e $tmp/kept/tpbench-mps.json ]] || fail "stop removed a pipe folder it did not create, or left its record"

# No control program: one line, exit 0; --require makes it exit 2. Nothing is created.
TPB_MPS_CONTROL=$tmp/no-such-control expect_rc 0 "$TPBENCH" mps start --pipe-dir "$tmp/none"
expect_line "no-such-control not found: no MPS daemon started$"
TPB_MPS_CONTROL=$tmp/no-such-control expect_rc 2 "$TPBENCH" mps start --pipe-dir "$tmp/none" --require
env -u TPB_MPS_CONTROL PATH=/nonexistent "$TPBENCH" mps start --pipe-dir "$tmp/none" >"$SCRATCH/last.out" 2>&1 ||
  fail "start without a control program on PATH did not exit 0"
expect_line "nvidia-cuda-mps-control not found on PATH: no MPS daemon started$"
[[ -e $tmp/none ]] && fail "a start that started nothing created the pipe folder"

# reap: the daemon of a dead tpbench run (pid above any pid_max) goes; a live run's stays.
state=$tmp/state
dead=$state/tpbench-mps-4194305
expect_rc 0 "$TPBENCH" mps start --pipe-dir "$dead/pipe"
stale=$(<"$dead/pipe/daemon.pid")
live=$state/tpbench-mps-$$
expect_rc 0 "$TPBENCH" mps start --pipe-dir "$live/pipe"
kept=$(<"$live/pipe/daemon.pid")
expect_rc 0 "$TPBENCH" mps reap --state-root "$state"
expect_line "^tpbench mps reap: stale MPS state of dead tpbench pid 4194305: daemon was sent quit \(its pid is unknown\); removed $dead$"
alive "$stale" && fail "reap left the daemon of a dead run running"
[[ -e $dead ]] && fail "reap left the state folder of a dead run"
alive "$kept" || fail "reap stopped the daemon of a live run"
expect_rc 0 "$TPBENCH" mps reap --state-root "$state"
expect_line "no stale MPS daemons under $state$"
expect_rc 0 "$TPBENCH" mps stop --pipe-dir "$live/pipe"

# Nothing is left behind.
left=$(our_daemons)
[[ -z $left ]] || fail "fake daemons left running: $left"
echo ok
