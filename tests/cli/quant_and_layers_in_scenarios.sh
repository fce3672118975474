# The quant sweep axis and model.layers (docs/scenarios.md): written, they join every case's
# params, label and id; not written, every id is what it was, each id of every stored baseline
# included; every wrong value is refused at validation (exit 2, the file, the JSON path and
# what is expected), a checkpoint's own quantization against the scenario's among them.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"

# 1. Every case id a stored baseline holds is still one its scenario expands to (the stored
#    records name their scenario; shared placement and the comm section are in the files).
for jsonl in baselines/*/*.jsonl; do
  name=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["scenario"])' "$jsonl")
  scenario=$(find scenarios -name "$name.json" -not -path "*/models/*" -not -path "*/qualify/*")
  [[ -n $scenario ]] || fail "$jsonl: no scenario $name under scenarios/"
  expect_rc 0 "$TPBENCH" run "$scenario" --dry-run --json
  python3 - "$jsonl" "$SCRATCH/last.out" <<'PY' || fail "$jsonl: ids moved"
import json, sys
stored = {json.loads(l)["case_id"] for l in open(sys.argv[1]) if l.strip()}
stored = {i for i in stored if not i.endswith(".digests")}
now = {c["id"] for c in json.load(open(sys.argv[2]))["cases"]}
missing = sorted(stored - now)
if missing:
    sys.exit(f"{sys.argv[1]}: {len(missing)} of {len(stored)} stored ids no longer expanded: {missing[:4]}")
PY
done

# 2. Written, both join the labels, and the ids differ from the same cases without them.
base='{"schema": 1, "name": "q", "workload": "engine", "device": "cpu", "model": {"preset": "tiny-dsv3"},
       "sweep": {"tp": [1, 2], "batch_size": [1], "seq_len": [16], "allreduce": ["shm"]}}'
echo "$base" >"$SCRATCH/plain.json"
python3 - "$SCRATCH/plain.json" "$SCRATCH/q.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["model"]["layers"] = 2
s["sweep"]["quant"] = ["bf16", "int4"]
json.dump(s, open(sys.argv[2], "w"))
PY
expect_rc 0 "$TPBENCH" run "$SCRATCH/plain.json" --dry-run --json
cp "$SCRATCH/last.out" "$SCRATCH/plain.out"
expect_rc 0 "$TPBENCH" run "$SCRATCH/q.json" --dry-run --json
python3 - "$SCRATCH/plain.out" "$SCRATCH/last.out" <<'PY' || fail "quant and layers do not show in labels and ids"
import json, sys
plain = json.load(open(sys.argv[1]))["cases"]
q = json.load(open(sys.argv[2]))["cases"]
labels = [c["label"] for c in q]
assert labels == ["decode tp1 b1 s16 L2 bf16 shm", "decode tp1 b1 s16 L2 int4 shm",
                  "decode tp2 b1 s16 L2 bf16 shm", "decode tp2 b1 s16 L2 int4 shm"], labels
assert [c["label"] for c in plain] == ["decode tp1 b1 s16 shm", "decode tp2 b1 s16 shm"], plain
assert not {c["id"] for c in plain} & {c["id"] for c in q}, "an id did not change"
assert len({c["id"] for c in q}) == 4
PY

# 3. The CPU engine runs both: the records carry quant and layers in their params, the weights
#    differ (other digests), and tp_invariant compares TP 2 with TP 1 of the same quantization.
python3 - "$SCRATCH/q.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["sweep"]["batch_size"] = [2]
s["measure"] = {"warmup": 1, "iterations": 2}
s["checks"] = ["tp_invariant", "plan_matches_measured"]
json.dump(s, open(sys.argv[1], "w"))
PY
expect_rc 0 "$TPBENCH" run "$SCRATCH/q.json" --no-report --results-dir "$SCRATCH/results"
python3 - "$(run_dir_of "$SCRATCH/results")/results.jsonl" <<'PY' || fail "the int4 run's records"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
assert [r["status"] for r in records] == ["ok"] * 4, [(r["label"], r["status"], r["error"]) for r in records]
by_quant = {}
for r in records:
    assert r["params"]["layers"] == 2, r["params"]
    assert r["plan"]["source"].startswith("planner (f32, tp "), r["plan"]  # the CPU engine holds fp32
    by_quant.setdefault(r["params"]["quant"], []).append(r)
    for check in r["checks"].values():
        assert check["status"] == "pass", (r["label"], check)
assert sorted(by_quant) == ["bf16", "int4"]
assert by_quant["bf16"][0]["digests"] != by_quant["int4"][0]["digests"], "int4 ran the bf16 weights"
tp_invariant = [r for r in records if "tp_invariant" in r["checks"]]
assert len(tp_invariant) == 2 and {r["params"]["quant"] for r in tp_invariant} == {"bf16", "int4"}, tp_invariant
PY

# 4. Refusals, each naming the file and the JSON path.
# $1: python statement on `s` (the scenario above), $2: the message expected after "s.json: "
refused() {
  python3 - "$SCRATCH/plain.json" "$SCRATCH/s.json" "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(s, open(sys.argv[2], "w"))
PY
  expect_rc 2 "$TPBENCH" run "$SCRATCH/s.json" --dry-run
  grep -qF "s.json: $2" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "not refused: $1"; }
}
refused 's["sweep"]["quant"] = ["fp8"]' '$.sweep.quant[0]: expected "bf16" or "int4" (int4: the routed experts INT4, everything else bf16; fp8 and f32 are the planner'"'"'s formats, not a model'"'"'s), got "fp8"'
refused 's["sweep"]["quant"] = ["bf16", "f32"]' '$.sweep.quant[1]: expected "bf16" or "int4"'
refused 's["model"]["layers"] = 0' '$.model.layers: expected a positive integer (at most the config'"'"'s num_hidden_layers) or "all", got 0'
refused 's["model"]["layers"] = 4' '$.model.layers: expected a positive integer at most 3 (the config'"'"'s num_hidden_layers) or "all", got 4'
refused 's["model"]["layers"] = 2; s["model"]["overrides"] = {"num_hidden_layers": 2}' '$.model.layers: set together with $.model.overrides.num_hidden_layers'
# A checkpoint (a folder as weights) is loaded as its config says: tiny-dsv3's has no
# quantization_config, so it is bf16, and int4 is refused.
mkdir -p "$SCRATCH/ckpt"
cp scenarios/models/tiny-dsv3.json "$SCRATCH/ckpt/config.json"
refused "s['model'] = {'path': '$SCRATCH/ckpt', 'weights': '$SCRATCH/ckpt'}; s['sweep']['quant'] = ['int4']" \
  "\$.sweep.quant[0]: expected \"bf16\" (the checkpoint $SCRATCH/ckpt holds bf16 weights, as its config says; a checkpoint's own quantization wins"
echo ok
