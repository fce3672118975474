#!/usr/bin/env bash
# Issue 15, path 4: "a baseline whose provenance says another git sha, a dirty tree and a
# Debug build compares silently". Now: compare prints both builds and says "not
# like-for-like"; `run --baselines` fails on it (exit 1, naming what differs) unless
# --allow-unlike-baseline (then a recorded warning); `run --update-baselines` refuses a dirty
# tree (exit 2) unless --force-dirty-baseline REASON, which lands in the .provenance.json; a
# baseline stored before builds were fingerprinted still compares, with a note.
#
# CI builds from a clean clone, a developer's build may be dirty: the other build is
# fabricated in the stored baseline, and a dirty current tree is TPB_PRETEND_DIRTY=1 (which
# can only make a build look dirtier). Assertions that need a clean build say so.
source "$(dirname "$0")/common.bash" "$@"

# A small CPU scenario without a control case and with one repetition: its latency verdicts
# are insufficient-data and no control can drift, so the exit status is the build verdict's.
S=$SCRATCH/another-build.json
cat >"$S" <<'JSON'
{"schema": 1, "name": "another-build", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [2], "allreduce": ["shm"], "dtype": ["bf16"], "message_bytes": [4096]},
 "measure": {"warmup": 1, "iterations": 5, "repetitions": 1, "timeout_s": 60},
 "checks": ["matches_reference"]}
JSON
B=$SCRATCH/baselines
R=$SCRATCH/runs
stored=$B/cpu-ref/another-build.jsonl
stored_prov=$B/cpu-ref/another-build.provenance.json
out=$SCRATCH/last.out
last_run() { sed -n 's|^results: \(.*\)/results.jsonl$|\1|p' "$out" | tail -1; }
has() { grep -qF -- "$1" "$out" || { cat "$out" >&2; fail "expected the line: $1"; }; }

# 1. Record a baseline (forced where this build is dirty: the reason is then recorded).
expect_rc 0 "$TPBENCH" run "$S" --no-report --results-dir "$R" --baselines "$B" --update-baselines \
  --force-dirty-baseline "cli test: the build under test may be dirty"
[[ -s $stored && -s $stored_prov ]] || fail "--update-baselines wrote no baseline"
first=$(last_run)
read -r this_dirty this_type < <(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["provenance"]
print("dirty" if p["git_dirty"] else "clean", p["build_type"] or "none")' "$first/run.json")
other_type=Debug
[[ $this_type == Debug ]] && other_type=Release

# Against itself: like-for-like, exit 0 (a dirty build is never like-for-like, even with itself).
if [[ $this_dirty == clean ]]; then
  expect_rc 0 "$TPBENCH" run "$S" --no-report --results-dir "$R" --baselines "$B"
  has "builds: like-for-like"
fi

# 2. The incident's baseline: another git sha, a dirty tree, another build type.
python3 - "$stored" "$stored_prov" "$other_type" <<'PY'
import json, sys
stored, prov_path, other_type = sys.argv[1:]
fake = {"git_sha": "0123456789abcdef0123456789abcdef01234567", "git_dirty": True, "build_type": other_type}
recs = [json.loads(l) for l in open(stored)]
for r in recs:
    r["provenance"].update(fake)
open(stored, "w").write("".join(json.dumps(r) + "\n" for r in recs))
doc = json.load(open(prov_path))
doc["provenance"].update(fake)
json.dump(doc, open(prov_path, "w"), indent=2)
PY
expect_rc 0 "$TPBENCH" compare "$stored" "$first/results.jsonl"
has "OLD build: tpbench 0.1.0, 0123456789ab+dirty, $other_type, "
has "NEW build: tpbench 0.1.0, "
# (A dirty build under test adds "NEW is from a dirty tree (...)" between the two.)
has "not like-for-like: OLD is from a dirty tree (0123456789ab+dirty); "
has "; build type: $other_type (OLD) vs $this_type (NEW)"
expect_rc 0 "$TPBENCH" compare "$stored" "$first/results.jsonl" --json
python3 - "$out" <<'PY' || fail "compare --json: no build verdict"
import json, sys
b = json.load(open(sys.argv[1]))["builds"]
assert b["like_for_like"] is False and b["verdict"] == "not-like-for-like", b
assert b["old"][0]["git_dirty"] is True and b["new"], b
PY

# 3. run --baselines fails on it, naming what differs; the verdict is in run.json and the records.
expect_rc 1 "$TPBENCH" run "$S" --no-report --results-dir "$R" --baselines "$B"
has "baseline build: tpbench 0.1.0, 0123456789ab+dirty, $other_type, "
has "this build:     tpbench 0.1.0, "
has "FAIL: baseline not like-for-like: stored baseline is from a dirty tree (0123456789ab+dirty); "
has "; build type: $other_type (stored baseline) vs $this_type (this build) (--allow-unlike-baseline accepts it)"
python3 - "$(last_run)" <<'PY' || fail "the verdict is not recorded"
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
b = run["summary"]["baselines"]["build"]
assert b["like_for_like"] is False and b["allowed"] is False and b["differences"], b
assert run["summary"]["exit_code"] == 1
recs = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
assert recs and all(r["baseline"]["build"]["verdict"] == "not-like-for-like" for r in recs if r["status"] == "ok"), recs
PY

# 4. --allow-unlike-baseline: the same comparison passes, with the warning, and says it was allowed.
expect_rc 0 "$TPBENCH" run "$S" --no-report --results-dir "$R" --baselines "$B" --allow-unlike-baseline
has "warning: baseline not like-for-like (allowed by --allow-unlike-baseline): stored baseline is from a dirty tree"
python3 - "$(last_run)" <<'PY' || fail "the allowed verdict is not recorded"
import json, sys
b = json.load(open(sys.argv[1] + "/run.json"))["summary"]["baselines"]["build"]
assert b["like_for_like"] is False and b["allowed"] is True, b
PY

# 5. --update-baselines refuses a dirty tree: one line, exit 2, nothing run or written.
before=$(md5sum "$stored" "$stored_prov")
runs_before=$(ls "$R" | wc -l)
expect_rc 2 env TPB_PRETEND_DIRTY=1 "$TPBENCH" run "$S" --no-report --results-dir "$R" --baselines "$B" --update-baselines
[[ $(wc -l <"$out") -eq 1 ]] || { cat "$out" >&2; fail "expected one line"; }
has "--update-baselines: this build is from a dirty tree"
has "--force-dirty-baseline REASON"
[[ $(md5sum "$stored" "$stored_prov") == "$before" ]] || fail "the refused update changed the baseline"
[[ $(ls "$R" | wc -l) -eq $runs_before ]] || fail "the refused update made a run folder"

# 6. Forced, with a reason: stored, the reason beside it; the dirty baseline then compares
#    as not like-for-like (forcing records why, it does not make the tree known).
expect_rc 0 env TPB_PRETEND_DIRTY=1 "$TPBENCH" run "$S" --no-report --results-dir "$R" --baselines "$B" \
  --update-baselines --allow-unlike-baseline --force-dirty-baseline "bisecting a flaky digest"
has "from a dirty tree, forced: bisecting a flaky digest"
python3 - "$stored_prov" <<'PY' || fail "no reason in the .provenance.json"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["forced_dirty_reason"] == "bisecting a flaky digest" and doc["provenance"]["git_dirty"] is True, doc
PY
expect_rc 1 "$TPBENCH" run "$S" --no-report --results-dir "$R" --baselines "$B"
has "FAIL: baseline not like-for-like: stored baseline is from a dirty tree"

# 7. A baseline stored before builds were fingerprinted: records with version, sha, dirty flag
#    and build type only, no .provenance.json. It compares, with a note saying what is unknown.
python3 - "$stored" "$stored_prov" <<'PY'
import json, os, sys
stored, prov_path = sys.argv[1:]
old_keys = ["git_sha", "git_dirty", "tpbench_version", "build_type", "hostname", "start_time",
            "cuda_driver", "cuda_runtime", "nccl_version", "topology", "gpus", "full"]
recs = [json.loads(l) for l in open(stored)]
for r in recs:
    r["provenance"] = {k: r["provenance"].get(k) for k in old_keys}
    r["provenance"]["git_dirty"] = False
    r["provenance"]["git_sha"] = "27adb80bd4ebc68760995a86564d06e5143997ad"
    r["baseline"] = None
open(stored, "w").write("".join(json.dumps(r) + "\n" for r in recs))
os.remove(prov_path)
PY
want=0
[[ $this_dirty == dirty ]] && want=1
expect_rc $want "$TPBENCH" run "$S" --no-report --results-dir "$R" --baselines "$B"
has "baseline build: tpbench 0.1.0, 27adb80bd4eb, $this_type, ?"
has "note: stored baseline predates build fingerprints: compiler, C++ flags"
[[ $this_dirty == clean ]] && has "builds: like-for-like"

# A real baseline recorded before build fingerprints (baselines/h200x1/memory-fraction-1gpu as
# stored at 27adb80, kept in tests/data after its re-recording) still compares.
expect_rc 0 "$TPBENCH" compare "$SOURCE_DIR/tests/data/baselines/memory-fraction-1gpu-27adb80.jsonl" "$SOURCE_DIR/tests/data/baselines/memory-fraction-1gpu-27adb80.jsonl"
has "OLD build: tpbench 0.1.0, 27adb80bd4eb, Release, GNU 13.3.0"
has "builds: like-for-like"
has "note: OLD predates build fingerprints: C++ flags, CUDA flags, CUDA architectures unknown"
echo "baseline_from_another_build: ok"
