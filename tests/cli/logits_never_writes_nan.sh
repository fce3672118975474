# Issue 37, finding 1: `logits` wrote all-NaN output and exited 0 (a config with rope_theta
# 1e-300 passed validation). Now such configs are refused (rope_theta in [1, 1e12], rms_norm_eps
# in (0, 1]), and logits that still come out NaN or Inf (here: finite weights so large that the
# lm_head's sums overflow) are a failure naming the output, the count and the first index, with
# no file written, at TP 1 in-process and at TP 2 through the rank processes.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
MODEL=tests/data/hf/dsv3-noqlora-f32
echo '[[1, 2, 3]]' >"$SCRATCH/ids.json"

for field in rope_theta:1e-300 rope_theta:0.5 rope_theta:1e300 rms_norm_eps:-1e-6 rms_norm_eps:0; do
  python3 - tests/data/hf/dsv3-noqlora-f32/config.json "$SCRATCH/cfg.json" "${field%%:*}" "${field#*:}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c[sys.argv[3]] = float(sys.argv[4])
if sys.argv[3] == "rope_theta" and "rope_theta" in c.get("rope_parameters", {}):
    c["rope_parameters"]["rope_theta"] = float(sys.argv[4])
json.dump(c, open(sys.argv[2], "w"))
PY
  expect_rc 2 "$TPBENCH" plan --model "$SCRATCH/cfg.json" --tp 1 --gpu H200
  grep -q "${field%%:*}: expected a finite number in" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "$field not refused"; }
done

# The f32 model with every lm_head weight 3e38: finite, and every logit overflows.
mkdir -p "$SCRATCH/big"
cp "$MODEL/config.json" "$SCRATCH/big/"
python3 - "$MODEL/model.safetensors" "$SCRATCH/big/model.safetensors" <<'PY'
import json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
name = next(k for k in header if k.endswith("lm_head.weight"))
assert header[name]["dtype"] == "F32", header[name]
b, e = header[name]["data_offsets"]
raw[8 + n + b:8 + n + e] = struct.pack("<f", 3e38) * ((e - b) // 4)
open(sys.argv[2], "wb").write(bytes(raw))
PY
for tp in 1 2; do
  rm -f "$SCRATCH/l.safetensors"
  expect_rc 1 "$TPBENCH" logits --model "$SCRATCH/big" --input-ids "$SCRATCH/ids.json" --tp $tp --out "$SCRATCH/l.safetensors"
  grep -qE "output 'logits': [0-9]+ of [0-9]+ values are NaN or Inf, the first at index" "$SCRATCH/last.out" ||
    { cat "$SCRATCH/last.out"; fail "tp $tp: non-finite logits not reported"; }
  [[ ! -e $SCRATCH/l.safetensors ]] || fail "tp $tp: a file of non-finite logits was written"
done
# The unchanged model still writes its logits.
expect_rc 0 "$TPBENCH" logits --model "$MODEL" --input-ids "$SCRATCH/ids.json" --out "$SCRATCH/ok.safetensors"
[[ -s $SCRATCH/ok.safetensors ]] || fail "finite logits not written"
echo ok
