#!/usr/bin/env bash
# Issue 19: "two hosts on one machine". `--virtual-hosts 2` makes each group's ranks claim two
# hosts (blocks of consecutive ranks, TPB_HOST_ID); the host-local rule then applies as on a
# real cluster: shm, one shared-memory segment, is refused for a group that spans hosts (the
# case is recorded skipped with the reason, never run over the "wrong" transport), a group of
# one rank is on one host and runs, and every record says where its ranks ran. The same rule
# at run time (a layout the sweep did not foresee) is tests/unit/host_layout_test.cpp's; under
# mpirun, with mpi crossing the hosts, tests/cli/mpirun_virtual_hosts.sh.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"

cat >"$SCRATCH/vh.json" <<'JSON'
{"schema": 1, "name": "virtual-hosts", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [1, 2], "allreduce": ["shm"], "dtype": ["f32"], "message_bytes": [4096]},
 "measure": {"warmup": 1, "iterations": 3}, "checks": ["matches_reference"]}
JSON
expect_rc 0 "$TPBENCH" run "$SCRATCH/vh.json" --virtual-hosts 2 --no-report --results-dir "$SCRATCH/r"
cat "$SCRATCH/last.out"
grep -qF "shm works only within one host, and this group of 2 ranks spans 2 hosts (rank 0 on vhost0, rank 1 on vhost1); backends that cross hosts: mpi" \
  "$SCRATCH/last.out" || fail "the tp2 shm case is not refused with the reason"
run=$(run_dir_of "$SCRATCH/r")
python3 - "$run" <<'PY' || fail "wrong records"
import json, sys
run = sys.argv[1]
recs = {r["params"]["tp"]: r for r in map(json.loads, open(run + "/results.jsonl"))}
assert recs[1]["status"] == "ok", recs[1]["status"]
assert [h["host_id"] for h in recs[1]["hosts"]] == ["vhost0"], recs[1]["hosts"]
assert recs[2]["status"] == "skipped" and "spans 2 hosts" in recs[2]["error"], (recs[2]["status"], recs[2]["error"])
assert json.load(open(run + "/run.json"))["launcher"]["virtual_hosts"] == 2
# The reproduce command keeps the option that made the case skip.
assert "--virtual-hosts 2" in recs[2]["reproduce"], recs[2]["reproduce"]
# provenance.hosts: the host the TP 1 group ran on, as its rank reported it (its own pid);
# the skipped TP 2 group started no ranks, so no vhost1.
hosts = json.load(open(run + "/run.json"))["provenance"]["hosts"]
assert [h["host_id"] for h in hosts] == ["vhost0"], hosts
assert hosts[0]["reported_by"] == {"group": hosts[0]["reported_by"]["group"], "rank": 0, "pid": recs[1]["pids"][0]}, hosts[0]
PY
# Without the option the same group is on one host and runs.
expect_rc 0 "$TPBENCH" run "$SCRATCH/vh.json" --no-report --results-dir "$SCRATCH/plain"
grep -q "2 ok, 0 failed, 0 skipped" "$SCRATCH/last.out" || fail "without --virtual-hosts the shm cases did not both run"
# One host, two groups (TP 1, TP 2): one entry keyed by the host name, the first group's report
# kept (rank 0 of the TP 1 case, by its own pid), the second counted, nothing differing.
python3 - "$(run_dir_of "$SCRATCH/plain")" <<'PY' || fail "wrong provenance.hosts"
import json, socket, sys
run = sys.argv[1]
recs = {r["params"]["tp"]: r for r in map(json.loads, open(run + "/results.jsonl"))}
prov = json.load(open(run + "/run.json"))["provenance"]
assert [h["host_id"] for h in prov["hosts"]] == [socket.gethostname()], prov["hosts"]
h = prov["hosts"][0]
assert h["reports"] == 2 and h["differences"] == [], h
assert h["reported_by"]["rank"] == 0 and h["reported_by"]["pid"] == recs[1]["pids"][0], (h["reported_by"], recs[1]["pids"])
assert h["reported_by"]["pid"] not in recs[2]["pids"], "the TP 2 group's report replaced the first"
for key in ("hostname", "os", "cpu_count", "gpus", "cuda_driver", "cuda_runtime", "nvidia_driver", "nccl_version", "env"):
    assert key in h and h[key] == prov[key], (key, h.get(key), prov.get(key))
PY
# Bad input: exit 2, naming the option.
expect_rc 2 "$TPBENCH" run "$SCRATCH/vh.json" --virtual-hosts 1 --dry-run
grep -qF "tpbench run: error: --virtual-hosts: expected a number of hosts, at least 2, got '1'" "$SCRATCH/last.out" || fail "--virtual-hosts 1 accepted"
expect_rc 2 "$TPBENCH" run "$SCRATCH/vh.json" --hosts a:2 --dry-run
grep -qF "tpbench run: error: --hosts places the ranks of an mpirun or srun job; it needs --launcher mpirun or srun" "$SCRATCH/last.out" \
  || fail "--hosts without a job launcher accepted"
expect_rc 2 "$TPBENCH" run "$SCRATCH/vh.json" --launcher torchrun --dry-run
grep -qF "tpbench run: error: --launcher: expected a launcher (one of fork, mpirun, srun), got 'torchrun'" "$SCRATCH/last.out" \
  || fail "an unknown launcher accepted"
echo ok
