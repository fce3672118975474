# Issue 33: a checkpoint tpbench cannot run is refused when read, naming the config field or the
# tensor and what was expected, exit 2; the good one (tests/data/hf/k25-int4-g32: made with
# compressed-tensors, two shards and an index) runs. One case per bad checkpoint: each copies the
# good one and breaks one thing (a config field, or one tensor in one shard's header).
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
GOOD=tests/data/hf/k25-int4-g32
echo '[[1, 2, 3, 4]]' >"$SCRATCH/ids.json"

# The good checkpoint at TP 1 and 2: the same logits up to fp32 sum order, INT4 read from two shards.
expect_rc 0 "$TPBENCH" logits --model "$GOOD" --input-ids "$SCRATCH/ids.json" --tp 1 --out "$SCRATCH/tp1.safetensors"
expect_rc 0 "$TPBENCH" logits --model "$GOOD" --input-ids "$SCRATCH/ids.json" --tp 2 --out "$SCRATCH/tp2.safetensors"

# $1: case name; $2: python editing the copy in $DIR (config as `c`, one tensor's header via edit());
# $3: what the message must say.
refused() {
  local dir="$SCRATCH/$1"
  rm -rf "$dir" && cp -r "$GOOD" "$dir"
  python3 - "$dir" "$2" <<'PY'
import json, os, struct, sys
d, code = sys.argv[1], sys.argv[2]
cfg_path = os.path.join(d, "config.json")
c = json.load(open(cfg_path))
q = c.get("quantization_config") or c["text_config"]["quantization_config"]
def edit(tensor, fn):
    """Rewrites the header of the shard holding `tensor`: fn(header) changes it in place (the
    data section is kept, so a shape or dtype edit must keep the byte count or the file's own
    checks catch it first)."""
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    path = os.path.join(d, index["weight_map"][tensor])
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    fn(header)
    h = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
def set_data(tensor, payload):
    """Overwrites the stored bytes of `tensor` (the same length)."""
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    path = os.path.join(d, index["weight_map"][tensor])
    raw = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    begin, end = json.loads(raw[8:8 + n])[tensor]["data_offsets"]
    assert end - begin == len(payload)
    raw[8 + n + begin:8 + n + end] = payload
    open(path, "wb").write(bytes(raw))
def drop(tensor):
    edit(tensor, lambda h: h.pop(tensor))
    index_path = os.path.join(d, "model.safetensors.index.json")
    index = json.load(open(index_path))
    index["weight_map"].pop(tensor)
    json.dump(index, open(index_path, "w"))
E = "language_model.model.layers.1.mlp.experts.2.gate_proj."
exec(code)
json.dump(c, open(cfg_path, "w"))
PY
  expect_rc 2 "$TPBENCH" logits --model "$dir" --input-ids "$SCRATCH/ids.json" --out "$SCRATCH/x.safetensors"
  grep -qF -- "$3" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "$1: not refused with: $3"; }
  [[ ! -e $SCRATCH/x.safetensors ]] || fail "$1: logits written for a refused checkpoint"
}

refused quant-method 'q["quant_method"] = "fp8"' \
  'quantization_config.quant_method: expected "compressed-tensors", got "fp8"'
refused format 'q["format"] = "int-quantized"' 'quantization_config.format: expected "pack-quantized"'
refused asymmetric 'q["config_groups"]["group_0"]["weights"]["symmetric"] = False' \
  'weights.symmetric: expected true (no zero point), got false'
refused group-size 'q["config_groups"]["group_0"]["weights"]["group_size"] = 128' 'weights.group_size: expected 32, got 128'
refused bit-width 'q["config_groups"]["group_0"]["weights"]["num_bits"] = 8' 'weights.num_bits: expected 4, got 8'
refused activations 'q["config_groups"]["group_0"]["input_activations"] = {"num_bits": 8, "type": "float"}' \
  'input_activations: expected null (weight-only W4A16)'
E=language_model.model.layers.1.mlp.experts.2.gate_proj.
refused missing-scale 'drop(E + "weight_scale")' "${E}weight_scale (the group scales) not found"
refused packed-shape \
  'edit(E + "weight_packed", lambda h: h[E + "weight_packed"].update(shape=[h[E + "weight_packed"]["shape"][0] * 2, h[E + "weight_packed"]["shape"][1] // 2]))' \
  "${E}weight_packed: expected I32 [128, 16]"
refused shape-disagrees 'set_data(E + "weight_shape", struct.pack("<ii", 128, 96))' \
  "${E}weight_shape says [128, 96], the config needs [128, 128]"
refused scale-dtype 'edit(E + "weight_scale", lambda h: h[E + "weight_scale"].update(dtype="F16"))' \
  "${E}weight_scale: expected BF16 [128, 4]"
refused nan-scale 'set_data(E + "weight_scale", b"\xc0\x7f" * 512)' "${E}weight_scale: non-finite scale at [0, 0]"
refused unquantized-expert \
  'edit(E + "weight_packed", lambda h: h.__setitem__(E + "weight", h.pop(E + "weight_packed")));
idx = json.load(open(os.path.join(d, "model.safetensors.index.json"))); idx["weight_map"][E + "weight"] = idx["weight_map"].pop(E + "weight_packed"); json.dump(idx, open(os.path.join(d, "model.safetensors.index.json"), "w"))' \
  "the expert is stored unquantized (${E}weight)"
echo ok
