#!/usr/bin/env bash
# Ctrl-C during a shared-placement run leaves nothing behind: starts `tpbench run` of a
# shared scenario, sends SIGINT once the ranks and the private MPS daemon are up, and prints
# the process table before and after (rank workers, MPS control daemon and server).
#   usage: scripts/gpu_sigint_demo.sh TPBENCH OUTDIR [SCENARIO]
set -u
TPB=${1:?usage: scripts/gpu_sigint_demo.sh TPBENCH OUTDIR [SCENARIO]}
OUTDIR=${2:?usage}
SCENARIO=${3:-scenarios/conformance/gpu-engine-tiny-shared.json}
mkdir -p "$OUTDIR"
# Job control on: a non-interactive shell starts background jobs with SIGINT ignored, and a
# signal ignored at exec stays ignored (tpbench keeps it so, as a shell user would expect).
set -m
show() { ps -eo pid,ppid,pgid,stat,comm | grep -E "tpbench|nvidia-cuda-mps" | grep -v grep || echo "  (none)"; }
"$TPB" run "$SCENARIO" --results-dir "$OUTDIR/sigint-runs" --no-report >"$OUTDIR/sigint.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do  # until some rank workers are up (at most 20 s)
  [ "$(pgrep -c -P "$pid")" -ge 2 ] && break
  sleep 0.2
done
sleep 1
echo "--- before SIGINT (controller $pid):"; show
kill -INT "$pid"
wait "$pid"; rc=$?
echo "--- controller exit status $rc (130 = SIGINT)"
sleep 1
echo "--- after:"; show
echo "--- private state folders left: $(ls -d /tmp/tpbench-mps-* 2>/dev/null | wc -l)"
tail -3 "$OUTDIR/sigint.log"
