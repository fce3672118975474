#!/usr/bin/env python3
"""Seeds and a dictionary for one fuzz target, made at fuzz time from repository files.

    fuzz/make_seeds.py TARGET OUT_DIR FILE...

Writes OUT_DIR/seeds/* and OUT_DIR/dict (libFuzzer -dict=). Big files are cut down so that
an execution stays fast, keeping their structure: a results/baseline file gives one seed per
record with every array cut to 4 elements, and pairs of records joined by the "----" line
compare_fuzzer splits at; a safetensors file keeps its 4 smallest tensors, their data re-laid.
JSON files are copied. The dictionary holds every JSON key and short string value of the
seeds, as quoted tokens, plus JSON's punctuation.
"""
import json
import os
import struct
import sys


def shrink(value):
    if isinstance(value, list):
        return [shrink(v) for v in value[:4]]
    if isinstance(value, dict):
        return {k: shrink(v) for k, v in value.items()}
    return value


def harvest(value, tokens):
    if isinstance(value, dict):
        for k, v in value.items():
            tokens.add(k)
            harvest(v, tokens)
    elif isinstance(value, list):
        for v in value:
            harvest(v, tokens)
    elif isinstance(value, str) and len(value) <= 40:
        tokens.add(value)


def safetensors_seed(data):
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", None)
    out_header, blobs, offset = {}, [], 0
    smallest = sorted(header, key=lambda k: (header[k]["data_offsets"][1] - header[k]["data_offsets"][0], k))
    for name in smallest[:4]:
        info = dict(header[name])
        begin, end = info["data_offsets"]
        blob = data[8 + n + begin : 8 + n + end]
        info["data_offsets"] = [offset, offset + len(blob)]
        out_header[name] = info
        blobs.append(blob)
        offset += len(blob)
    if meta is not None:
        out_header["__metadata__"] = meta
    text = json.dumps(out_header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs), out_header


def main():
    target, out_dir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    seeds = os.path.join(out_dir, "seeds")
    os.makedirs(seeds, exist_ok=True)
    tokens = set()
    records = []
    for i, path in enumerate(files):
        base = "%03d-%s" % (i, os.path.basename(path))
        with open(path, "rb") as f:
            data = f.read()
        if target == "safetensors_fuzzer":
            seed, header = safetensors_seed(data)
            harvest(header, tokens)
            with open(os.path.join(seeds, base), "wb") as f:
                f.write(seed)
        elif path.endswith(".jsonl"):
            lines = [json.loads(l) for l in data.decode().splitlines() if l.strip()]
            for j, record in enumerate(lines[:6]):
                small = shrink(record)
                harvest(small, tokens)
                records.append(json.dumps(small))
                with open(os.path.join(seeds, "%s-%d" % (base, j)), "w") as f:
                    f.write(records[-1] + "\n")
        else:
            try:
                harvest(json.loads(data), tokens)
            except ValueError:
                pass
            with open(os.path.join(seeds, base), "wb") as f:
                f.write(data)
    if target == "compare_fuzzer":
        for j in range(0, len(records) - 1, 2):
            with open(os.path.join(seeds, "pair-%03d" % j), "w") as f:
                f.write(records[j] + "\n----\n" + records[j + 1] + "\n")
    with open(os.path.join(out_dir, "dict"), "w") as f:
        for t in ['"{"', '"}"', '"["', '"]"', '":"', '","', '"null"', '"true"', '"false"', '"-1"', '"1e308"',
                  '"\\\\u0000"', '"\\x0A----\\x0A"']:
            f.write(t + "\n")
        for t in sorted(tokens):  # libFuzzer's dictionary escapes only \\, \" and \xNN: plain tokens only
            if t and all(c.isalnum() or c in "_.-/: +" for c in t) and t.isascii():
                f.write('"\\"%s\\""\n' % t)


if __name__ == "__main__":
    main()
