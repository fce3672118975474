#!/bin/bash
# Fake nvidia-cuda-mps-control for the MPS lifecycle tests (tests/unit/mps_test.cpp,
# tests/cli/mps_lifecycle.sh): -d starts a sleep loop in a session of its own (pid in
# daemon.pid) and creates control; "quit" kills it; "get_server_list" exits 0 while it lives.
# Every call is logged to calls.log beside this script. A file "ignore-quit" in the pipe
# folder makes "quit" do nothing.
set -u
d=${CUDA_MPS_PIPE_DIRECTORY:?}
echo "${1:-stdin}" >>"$(dirname "$0")/calls.log"
alive() {
  [[ -s $d/daemon.pid ]] || return 1
  local pid state
  pid=$(<"$d/daemon.pid")
  kill -0 "$pid" 2>/dev/null || return 1
  read -r _ _ state _ <"/proc/$pid/stat" || return 1
  [[ $state != Z ]]
}
if [[ ${1:-} == -d ]]; then
  if alive; then echo "An instance of this daemon is already running" >&2; exit 1; fi
  mkdir -p "$d"
  rm -f "$d/daemon.pid"
  setsid bash -c 'echo $$ >"$1/daemon.pid.tmp" && mv "$1/daemon.pid.tmp" "$1/daemon.pid"; while :; do sleep 0.2; done' \
    fake-mps-daemon "$d" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 500); do [[ -s $d/daemon.pid ]] && break; sleep 0.01; done
  [[ -s $d/daemon.pid ]] || { echo "fake daemon did not start" >&2; exit 1; }
  touch "$d/control"
  exit 0
fi
read -r command || true
case $command in
  quit)
    [[ -e $d/ignore-quit ]] && exit 0
    if alive; then kill -TERM -- "-$(<"$d/daemon.pid")"; fi
    rm -f "$d/control"
    exit 0 ;;
  get_server_list) alive ;;
  *) echo "unknown command: $command" >&2; exit 1 ;;
esac
