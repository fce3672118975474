#!/usr/bin/env bash
# Issue 19: the CPU engine under mpirun across two virtual hosts (--virtual-hosts 2): each
# group's ranks claim vhost0 and vhost1, so shm is refused with the reason (recorded skipped)
# while mpi, which crosses hosts, runs at TP 2 and 4; every record names each rank's host and
# host id, and the job command that started it. run.json's provenance.hosts has one entry per
# virtual host (same name, distinct ids), each with its facts as a rank there saw them: the
# NCCL_* variable that mpirun's -x gives the ranks only, the reporting rank's own pid.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
require_mpirun

expect_rc 0 "$TPBENCH" run scenarios/conformance/cpu-engine-mpi.json --launcher mpirun \
  --launcher-args="--oversubscribe -x NCCL_TPB_TEST_MARK=seen-by-the-ranks" \
  --virtual-hosts 2 --no-report --results-dir "$SCRATCH/r"
cat "$SCRATCH/last.out"
run=$(run_dir_of "$SCRATCH/r")
python3 - "$run" <<'PY' || fail "wrong records"
import json, socket, sys
run = sys.argv[1]
recs = [json.loads(l) for l in open(run + "/results.jsonl")]
by = {(r["params"]["tp"], r["params"]["allreduce"]): r for r in recs}
for tp in (2, 4):
    shm, mpi = by[(tp, "shm")], by[(tp, "mpi")]
    assert shm["status"] == "skipped", shm["status"]
    assert shm["error"].startswith(f"shm works only within one host, and this group of {tp} ranks spans 2 hosts"), shm["error"]
    assert mpi["status"] == "ok", (mpi["status"], mpi.get("error"))
    assert mpi["allreduce_ran"]["backend"] == "mpi", mpi["allreduce_ran"]
    half = tp // 2
    assert [h["host_id"] for h in mpi["hosts"]] == ["vhost0"] * half + ["vhost1"] * half, mpi["hosts"]
    assert {h["host"] for h in mpi["hosts"]} == {socket.gethostname()}, mpi["hosts"]
    assert mpi["launch_command"][:3] == ["mpirun", "-np", str(tp)] and "TPB_VIRTUAL_HOSTS" in mpi["launch_command"], mpi["launch_command"]
run_json = json.load(open(run + "/run.json"))
launcher = run_json["launcher"]
assert launcher["kind"] == "mpirun" and launcher["virtual_hosts"] == 2, launcher
# provenance.hosts: one entry per host id the records name, from the ranks, merged over the
# TP 2 and TP 4 groups (the shm cases were skipped before any group started).
prov = run_json["provenance"]
hosts = {h["host_id"]: h for h in prov["hosts"]}
assert sorted(hosts) == ["vhost0", "vhost1"] and len(prov["hosts"]) == 2, prov["hosts"]
assert {h["host_id"] for r in recs for h in r.get("hosts") or []} <= set(hosts), "a record's host_id is not in provenance.hosts"
assert "NCCL_TPB_TEST_MARK" not in prov["env"], "the controller's environment has the ranks' marker"
for hid, h in hosts.items():
    for key in ("hostname", "os", "cpu_count", "gpus", "cuda_driver", "cuda_runtime", "nvidia_driver", "nccl_version",
                "mpi_library", "env", "git_sha", "reported_by", "reports", "differences"):
        assert key in h, (hid, key, h)
    assert h["hostname"] == socket.gethostname(), h
    assert isinstance(h["gpus"], list) and isinstance(h["cpu_count"], int) and h["cpu_count"] >= 1, h
    assert h["env"].get("NCCL_TPB_TEST_MARK") == "seen-by-the-ranks", ("not the ranks' environment", h["env"])
    assert h["reports"] == 2 and h["differences"] == [], h
    by = h["reported_by"]
    # The reporting rank's own pid, a rank of that host in a record of its group.
    assert any(r["pids"][by["rank"]] == by["pid"] and r["hosts"][by["rank"]]["host_id"] == hid
               for r in recs if r["status"] == "ok"), (hid, by)
PY
echo ok
