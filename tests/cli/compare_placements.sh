# `tpbench compare --placements A B` (issue 21): one scenario in exclusive and in shared
# placement, paired case by case without the placement, digests bitwise equal.
# CPU records carry no placement, so the two sides are one real CPU run (ci-smoke: TP 1, 2
# and 4) rewritten: A says exclusive, B says shared and has other case ids (as shared ids
# are: placement joins the id), C is B with one digest of one rank changed, D is B without
# its TP 4 cases. Pairing, verdicts and exit status are what is tested, not placement itself.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
export CUDA_VISIBLE_DEVICES=

expect_rc 0 "$TPBENCH" run ci-smoke --no-report --results-dir "$SCRATCH/runs"
RUN=$(run_dir_of "$SCRATCH/runs")
python3 - "$RUN/results.jsonl" "$SCRATCH" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
def side(placement, new_id, keep=lambda r: True):
    out = []
    for r in records:
        r = json.loads(json.dumps(r))
        r["placement"] = {"placement": placement, "ranks_per_gpu": 1 if placement == "exclusive" else 2}
        r["case_id"] = new_id(r["case_id"])
        if keep(r):
            out.append(r)
    return out
def write(name, recs):
    with open(f"{sys.argv[2]}/{name}.jsonl", "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
a = side("exclusive", lambda i: i)
b = side("shared", lambda i: i[::-1])
c = json.loads(json.dumps(b))
target = next(r for r in c if r["role"] == "sweep" and r["params"]["tp"] == 2)
target["digests"][1]["output"] = "0" * 16
d = side("shared", lambda i: i[::-1], lambda r: r["params"]["tp"] != 4)
for name, recs in (("a", a), ("b", b), ("c", c), ("d", d)):
    write(name, recs)
with open(f"{sys.argv[2]}/changed.txt", "w") as f:
    f.write(target["label"] + "\n")
print(len(a), "records per side; changed:", target["label"])
PY
CASES=$(wc -l <"$SCRATCH/a.jsonl")
CHANGED=$(cat "$SCRATCH/changed.txt")

# Every case pairs (no case id in common) and every digest is equal; either order.
for order in "a b" "b a"; do
  set -- $order
  expect_rc 0 "$TPBENCH" compare --placements "$SCRATCH/$1.jsonl" "$SCRATCH/$2.jsonl"
  grep -qxF "$CASES case(s) paired: $CASES equal, 0 within the bf16 budget, 0 mismatch(es)" "$SCRATCH/last.out" \
    || { cat "$SCRATCH/last.out" >&2; fail "compare --placements $order: not every case paired equal"; }
done
grep -q "^A: .*a.jsonl (exclusive placement)" <(cd "$SCRATCH" && "$TPBENCH" compare --placements a.jsonl b.jsonl) \
  || fail "the side's placement is not named"

# One digest changed: exit 1, and the row names the case, its backend, the rank and the output.
expect_rc 1 "$TPBENCH" compare --placements "$SCRATCH/a.jsonl" "$SCRATCH/c.jsonl"
grep -E "^$CHANGED +shm +2 .*bitwise +mismatch: rank 1 output 'output': " "$SCRATCH/last.out" >/dev/null \
  || { cat "$SCRATCH/last.out" >&2; fail "the mismatch does not name case '$CHANGED', backend shm and rank 1"; }
grep -qxF "$CASES case(s) paired: $((CASES - 1)) equal, 0 within the bf16 budget, 1 mismatch(es)" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "the mismatch is not counted"; }
expect_rc 1 "$TPBENCH" compare --placements "$SCRATCH/a.jsonl" "$SCRATCH/c.jsonl" --json
python3 - "$SCRATCH/last.out" "$CHANGED" "$CASES" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
bad = [p for p in out["pairs"] if p["verdict"] != "equal"]
assert out["mismatches"] == 1 and len(bad) == 1, out["mismatches"]
p = bad[0]
assert (p["label"], p["backend"], p["tp"], p["verdict"], p["rule"]) == (sys.argv[2], "shm", 2, "mismatch", "bitwise"), p
assert "rank 1" in p["detail"] and p["case_id"]["a"] != p["case_id"]["b"], p
assert len(out["pairs"]) == int(sys.argv[3]) and out["placement"] == {"a": "exclusive", "b": "shared"}, out["placement"]
assert all(isinstance(q["step_us"]["a"], float) for q in out["pairs"]), "step times missing"
PY

# Cases on one side only are listed, never a failure; the rest still pair.
expect_rc 0 "$TPBENCH" compare --placements "$SCRATCH/a.jsonl" "$SCRATCH/d.jsonl"
N4=$(grep -c "^not paired: allreduce tp4 .*: exclusive only (ok; no such case in " "$SCRATCH/last.out" || true)
[[ $N4 -gt 0 ]] || { cat "$SCRATCH/last.out" >&2; fail "the TP 4 cases missing from D are not listed"; }
grep -qxF "$((CASES - N4)) case(s) paired: $((CASES - N4)) equal, 0 within the bf16 budget, 0 mismatch(es)" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "the cases on both sides did not pair"; }

# Nothing about placement to say: exit 2 with the reason.
expect_rc 2 "$TPBENCH" compare --placements "$SCRATCH/a.jsonl" "$SCRATCH/a.jsonl"
grep -q "nothing comparable: both sides ran in exclusive placement" "$SCRATCH/last.out" || fail "same placement accepted"
expect_rc 2 "$TPBENCH" compare --placements "$RUN" "$RUN"
grep -q "neither side records a placement" "$SCRATCH/last.out" || fail "CPU runs compared across placements"
expect_rc 2 "$TPBENCH" compare --placements "$SCRATCH/a.jsonl" /dev/null
grep -q "nothing comparable: /dev/null holds no record" "$SCRATCH/last.out" || fail "an empty side accepted"
expect_rc 2 "$TPBENCH" compare --placements "$SCRATCH/a.jsonl" "$SCRATCH/b.jsonl" --latency-tol 0.1
grep -q "does not apply with --placements" "$SCRATCH/last.out" || fail "a latency tolerance silently ignored"
# A field of the wrong type is bad input named by file, line and JSON path, never a crash.
python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rec = json.loads(lines[1]); rec["params"]["tp"] = "two"; lines[1] = json.dumps(rec)
open(sys.argv[2], "w").write("\n".join(lines) + "\n")' "$SCRATCH/b.jsonl" "$SCRATCH/hostile.jsonl"
expect_rc 2 "$TPBENCH" compare --placements "$SCRATCH/a.jsonl" "$SCRATCH/hostile.jsonl"
grep -qF "$SCRATCH/hostile.jsonl:2: \$.params.tp: expected an integer, got \"two\"" "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "a wrong type is not named"; }
echo "ok: compare --placements pairs $CASES cases, names the changed digest, lists one-sided cases"
