# Issue 17, finding 7: NaN weights in a safetensors file gave all-NaN logits and an ok run; a
# conformance suite never calls NaN a pass. Now a non-finite weight is refused at load, naming
# the file, the tensor and the element (exit 2), and a case whose outputs hold NaN or Inf fails
# with the first position (record.error; tests/unit for the sentence).
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
MODEL=tests/data/hf/dsv3-noqlora-f32
mkdir -p "$SCRATCH/nan-model"
cp "$MODEL/config.json" "$SCRATCH/nan-model/"
# The checkpoint with one weight of one tensor set to NaN (safetensors: u64 header length, JSON
# header, then the raw data).
python3 - "$MODEL/model.safetensors" "$SCRATCH/nan-model/model.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
name = next(k for k, v in sorted(header.items()) if k != "__metadata__" and v["dtype"] == "F32" and "norm" not in k)
begin = 8 + n + header[name]["data_offsets"][0]
data = bytearray(raw)
data[begin + 12:begin + 16] = struct.pack("<f", float("nan"))  # element 3
open(sys.argv[2], "wb").write(bytes(data))
print(name)
PY
tensor=$(python3 -c "
import json,struct,sys
raw=open('$SCRATCH/nan-model/model.safetensors','rb').read(); n=struct.unpack('<Q',raw[:8])[0]
h=json.loads(raw[8:8+n]); print(next(k for k,v in sorted(h.items()) if k!='__metadata__' and v['dtype']=='F32' and 'norm' not in k))")
expect_rc 2 "$TPBENCH" logits --model "$SCRATCH/nan-model" --input-ids "$MODEL/input_ids.json" --out "$SCRATCH/logits.safetensors"
grep -q "model.safetensors: tensor $tensor: non-finite value nan at element 3" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "the NaN weight is not refused naming its tensor"; }
[[ ! -e "$SCRATCH/logits.safetensors" ]] || fail "logits were written from NaN weights"
# The unmodified checkpoint still runs.
expect_rc 0 "$TPBENCH" logits --model "$MODEL" --input-ids "$MODEL/input_ids.json" --out "$SCRATCH/logits.safetensors"

# "Unless the scenario expects it": nonfinite "expected" makes NaN/Inf a case's required
# outcome (an overflow drill), so finite outputs fail it; any other value is refused.
python3 - "$SCRATCH" <<'PY'
import json, sys
s = json.load(open("scenarios/ci-smoke.json"))
s.update(name="expects-nan", nonfinite="expected", checks=[])
s["sweep"] = {"tp": [2], "allreduce": ["shm"], "dtype": ["f32"], "message_bytes": [1024]}
s.pop("control")
json.dump(s, open(sys.argv[1] + "/expected.json", "w"))
s["nonfinite"] = "ignore"
json.dump(s, open(sys.argv[1] + "/ignore.json", "w"))
PY
expect_rc 1 "$TPBENCH" run "$SCRATCH/expected.json" --no-report --results-dir "$SCRATCH/expected"
grep -q 'no output holds NaN or Inf on any rank, and the scenario expects them (nonfinite: \\"expected\\")' \
  "$(run_dir_of "$SCRATCH/expected")/results.jsonl" || fail "finite outputs passed a scenario that expects NaN"
expect_rc 2 "$TPBENCH" run "$SCRATCH/ignore.json" --no-report --results-dir "$SCRATCH/ignore"
grep -q 'ignore.json: $.nonfinite: expected "fail" (the default: NaN or Inf in an output fails the case) or "expected"' \
  "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "nonfinite: a value other than fail or expected was not refused"; }
echo ok
