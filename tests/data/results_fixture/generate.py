#!/usr/bin/env python3
"""Writes the report tests' fixture: results.jsonl + run.json in this folder.

Every number here is SYNTHETIC (simple latency/bandwidth models plus seeded noise), shaped
like a 2-GPU sweep so that every report section has data: allreduce sizes x backends,
decode and prefill latency over batch x seq_len x backend, a mem_fraction sweep with plans
and measured memory (one infeasible), a failed and a skipped case, checks with a failure
and baseline verdicts with a regression. run.json says "fixture": true and the report
shows that on top. The shapes are tpbench's own: schemas/record.schema.json and
schemas/run.schema.json must accept both files (ctest schemas.validate), so a change of the
record format shows here too. Re-run after changing it: python3 generate.py
"""

import hashlib
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_ID = "fixture-20260101T000000Z"
GIB = 2 ** 30
rng = random.Random(20260101)

# run.json's provenance (suite/provenance.cpp, collect_provenance) and the compact part every
# record repeats (compact_provenance).
FULL_PROVENANCE = {
    "tpbench_version": "0.1.0",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
    "git_dirty": False,
    "build_type": "RelWithDebInfo",
    "compiler": "GNU 12.2.0",
    "cxx_flags": "-O2 -g -DNDEBUG",
    "cuda_compiler": "13.0.88",
    "cuda_flags": "-O2 -g -DNDEBUG",
    "cuda_architectures": "90",
    "nccl_version": "2.27.0",
    "have_cuda": True,
    "have_nccl": True,
    "hostname": "fixture-host",
    "start_time": "2026-01-01T00:00:00Z",
    "os": "Linux 6.1.0 x86_64",
    "cpu_count": 64,
    "gpus": [{"ordinal": i, "name": "SYNTHETIC-GPU-A (fixture)", "memory_bytes": 141 * 2 ** 30,
              "sm_count": 132, "compute_capability": "9.0"} for i in range(2)],
    "cuda_driver": "13.0",
    "cuda_runtime": "13.0",
    "topology": "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n",
    "nvidia_driver": "580.00 (synthetic)",
    "env": {"NCCL_DEBUG": "WARN", "CUDA_VISIBLE_DEVICES": "0,1"},
}
PROVENANCE = {key: FULL_PROVENANCE[key] for key in (
    "git_sha", "git_dirty", "tpbench_version", "build_type", "compiler", "cxx_flags", "have_cuda",
    "cuda_compiler", "cuda_flags", "cuda_architectures", "hostname", "start_time", "cuda_driver",
    "cuda_runtime", "nccl_version", "topology")}
PROVENANCE["gpus"] = [g["name"] for g in FULL_PROVENANCE["gpus"]]
PROVENANCE["full"] = "run.json"
# The engine records' model, as a scenario writes it (part of the case id in tpbench).
MODEL = {"preset": "kimi-k2.5", "overrides": {"num_hidden_layers": 3}, "seed": 1234, "weights": "synthetic"}


def case_id(params):
    # 16 hex digits, as tpbench's FNV-1a 64 ids (a hash of the params here, not theirs).
    text = json.dumps(params, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest(text):
    """An output digest: 16 hex digits."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def samples(p50_us, n=10, spread=0.03):
    return [round(p50_us * (1 + rng.uniform(-spread, spread * 2)), 3) for _ in range(n)]


def latency(xs):
    s = sorted(xs)

    def q(f):
        return s[min(len(s) - 1, int(round(f * (len(s) - 1))))]
    return {"unit": "us", "merge": "max across ranks per iteration", "samples_us": xs,
            "count": len(xs), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99),
            "mean": round(sum(xs) / len(xs), 3), "min": s[0], "max": s[-1]}


def record(params, status="ok", role="sweep", **rest):
    # Shaped like suite/runner.cpp's records: per-rank arrays for memory, digests and comm.
    workload = rest.get("workload", "engine")
    rec = {"schema": 1, "run_id": RUN_ID, "case_id": case_id(dict(params, role=role)),
           "role": role, "scenario": "fixture-h200x2-like-sweep", "device": "cuda",
           "workload": workload, "model": MODEL if workload == "engine" else None,
           "label": rest.pop("label", None), "params": params, "status": status,
           "error": None, "plan": None, "memory": None, "latency": None, "throughput": None,
           "digests": None, "checks": {}, "baseline": None, "provenance": PROVENANCE}
    rec.update(rest)
    rec["reproduce"] = f"tpbench run /fixture/scenario.json --case {rec['case_id']}"
    for name, check in rec["checks"].items():
        check.setdefault("cases", [rec["case_id"]])
    for metric, entry in (rec["baseline"] or {}).items():
        entry.update(case_id=rec["case_id"], label=rec["label"], metric=metric)
    return rec


def tokens_rate(tokens, lat):
    return {"tokens_per_s": round(tokens / (lat["mean"] * 1e-6), 1), "tokens_per_step": float(tokens),
            "basis": "mean"}


def base_params(**kw):
    p = {"mode": "decode", "tp": 2, "batch_size": 1, "seq_len": 1024, "allreduce": "nccl",
         "mem_fraction": 0.85, "instrumentation": "off", "cuda_graph": True}
    p.update(kw)
    return p


def ok_checks(extra=None):
    checks = {"deterministic": {"status": "pass", "detail": "bitwise identical over 2 runs"}}
    checks.update(extra or {})
    return checks


def verdict(verdict_name, ratio, half_width=0.02, p_value=None):
    """A baseline verdict as suite/baseline.cpp writes one (record() adds case_id, label and
    metric); old and new are synthetic, new = ratio x old."""
    v = {"verdict": verdict_name, "ratio": ratio, "old": 100.0, "new": round(100.0 * ratio, 6),
         "detail": f"synthetic fixture verdict, x{ratio}"}
    if p_value is not None:
        v.update(p_value=p_value, ci_low=round(ratio - half_width, 4), ci_high=round(ratio + half_width, 4))
    return v


records = []

# --- allreduce: 1 KiB .. 256 MiB, every 4x, four backends -----------------------------
# Synthetic models: latency = fixed cost + bytes / bandwidth (bus bandwidth = algbw at TP=2).
AR_MODEL = {"nccl": (14.0, 330e9), "custom-oneshot": (5.0, 140e9),
            "custom-twoshot": (8.0, 260e9)}
sizes = [1024 * 4 ** i for i in range(10)]
for backend_name in ("nccl", "custom-oneshot", "custom-twoshot", "auto"):
    for nbytes in sizes:
        if backend_name == "auto":  # custom one-shot below 512 KiB, NCCL above
            fixed, bw = AR_MODEL["custom-oneshot" if nbytes < 512 * 1024 else "nccl"]
        else:
            fixed, bw = AR_MODEL[backend_name]
        p50 = fixed + nbytes / bw * 1e6
        xs = samples(p50)
        lat = latency(xs)
        algbw = nbytes / (lat["mean"] * 1e-6) / 1e9
        params = {"tp": 2, "allreduce": backend_name,
                  "message_bytes": nbytes, "dtype": "bf16", "instrumentation": "off",
                  "cuda_graph": False, "mem_fraction": 0.85}
        rec = record(params, label=f"allreduce {backend_name} {nbytes} B bf16 tp=2",
                     workload="allreduce", latency=lat,
                     throughput={"algbw_GBps": round(algbw, 3), "busbw_GBps": round(algbw, 3),
                                 "bus_factor": 1.0, "bytes_per_step": float(nbytes),
                                 "basis": "mean"},
                     memory=[{}, {}],
                     comm=[{"backend": backend_name, "memory_bytes": 2 ** 25,
                            "fallback_reason": ""}] * 2,
                     metrics=[{"bytes": nbytes, "matches_serial_sum": True}] * 2,
                     digests=[{"output": digest(f"ar{nbytes}")}] * 2,
                     checks={"matches_reference": {"status": "pass",
                                                   "detail": "every rank (2) bitwise equal to the reference"}},
                     baseline={"latency_us": verdict("ok", 1.0 + rng.uniform(-0.01, 0.01))})
        records.append(rec)
# One regression: custom-twoshot at 16 MiB is 12 % slower than its baseline.
for rec in records:
    if rec["params"]["allreduce"] == "custom-twoshot" and rec["params"]["message_bytes"] == 16 * 2 ** 20:
        rec["baseline"]["latency_us"].update(verdict("regression", 1.12, 0.03, 0.0008))
        rec["baseline"]["memory.rank0.after_comm"] = dict(
            verdict("regression", 1.04), case_id=rec["case_id"], label=rec["label"],
            metric="memory.rank0.after_comm")
    if rec["params"]["allreduce"] == "custom-oneshot" and rec["params"]["message_bytes"] == 1024:
        rec["baseline"]["latency_us"].update(verdict("noise", 1.04, 0.06, 0.21))

# --- decode and prefill: batch x seq_len x backend --------------------------------------
ENGINE_COMM = {"nccl": 1.0, "custom-oneshot": 0.82, "custom-twoshot": 0.9, "auto": 0.84}


def engine_latency_us(mode, batch, seq, backend_name):
    if mode == "decode":
        compute = 900 + 35 * batch + 0.04 * batch * seq
        comm = 61 * 2 * (14 + 0.02 * batch)  # 61 layers, 2 allreduces each
    else:
        compute = 2000 + 0.9 * batch * seq
        comm = 61 * 2 * (14 + 0.004 * batch * seq)
    return compute + comm * ENGINE_COMM[backend_name]


def kv_tokens(fraction, comm_gib):
    # synthetic: weights etc. take 49 % of 141 GiB; communicator buffers shrink the rest
    rest_gib = 141 * fraction - 141 * 0.49 - comm_gib
    cell = (512 + 64) * 61 * 2
    return max(0, int(rest_gib * GIB // cell)), rest_gib


def plan_for(params):
    fraction = params["mem_fraction"]
    comm = {"nccl": 0.5, "custom-oneshot": 2.75, "custom-twoshot": 2.75,
            "auto": 3.25}[params["allreduce"]]
    tokens, rest_gib = kv_tokens(fraction, comm)
    breakdown = {"weights": int(62.0 * GIB), "comm_buffers": int(comm * GIB),
                 "graph_pool": int(1.5 * GIB), "activations": int(2.25 * GIB),
                 "kv_cache": int(max(0.0, rest_gib) * GIB)}
    plan = {"source": "planner (bf16, tp 2) for SYNTHETIC-GPU-A (fixture)",
            "gpu": "SYNTHETIC-GPU-A (fixture)", "mem_fraction": fraction,
            "allreduce": params["allreduce"], "feasible": tokens > 0, "max_tokens": tokens,
            "requested_tokens": params["batch_size"] * params["seq_len"],
            "rest_bytes": round(rest_gib * GIB), "total_bytes": 141 * GIB,
            "kv_cell_bytes": (512 + 64) * 61 * 2, "breakdown": breakdown,
            "verdict": "feasible" if tokens > 0 else
            "not enough memory: rest is negative; smallest fraction that works: 0.50"}
    return plan


def measured_for(plan, tp):
    memory = []
    for rank in range(tp):
        bd = {k: int(v * (1 + rng.uniform(-0.02, 0.04))) for k, v in plan["breakdown"].items()}
        used = 0
        phases = {}
        for phase, term in (("after_init", None), ("after_comm", "comm_buffers"),
                            ("after_weights", "weights"), ("after_kv", "kv_cache"),
                            ("peak", "activations")):
            if term:
                used += bd[term] + (bd["graph_pool"] if term == "activations" else 0)
            else:
                used = int(0.6 * GIB)
            phases[phase] = {"used_bytes": used, "free_bytes": int(141 * GIB) - used}
        memory.append(dict(phases, source="cudaMemGetInfo (synthetic)", breakdown=bd))
    return memory


for mode, batches, seqs, backends in (
        ("decode", (1, 4, 16, 64), (128, 1024, 4096), ("nccl", "custom-oneshot", "auto")),
        ("prefill", (1, 2, 4), (512, 2048), ("nccl", "auto"))):
    for seq in seqs:
        for batch in batches:
            for backend_name in backends:
                params = base_params(mode=mode, batch_size=batch, seq_len=seq,
                                     allreduce=backend_name)
                lat = latency(samples(engine_latency_us(mode, batch, seq, backend_name)))
                tokens = batch if mode == "decode" else batch * seq
                checks = ok_checks({"equal_across_allreduce": {
                    "status": "pass", "detail": "bitwise identical to nccl"}})
                # Weight-read roofline (decode): the bytes a step reads, a flat part plus
                # the routed experts chosen, at a copy bandwidth of 4200 GB/s; no rng, so
                # the rest of the fixture keeps its numbers.
                metrics = [{"mode": mode, "tokens_per_step": batch if mode == "decode" else batch * seq}] * 2
                if mode == "decode":
                    weight_bytes = 1.0e10 + 1.5e8 * min(batch, 64)
                    read_us = weight_bytes / (4200.0 * 1e3)
                    metrics = [dict(metrics[0], step_weight_bytes=weight_bytes, copy_GBps=4200.0,
                                    weight_read_us=round(read_us, 3),
                                    x_weight_read_time=round(lat["p50"] / read_us, 4))] * 2
                rec = record(params, label=f"{mode} bs={batch} seq={seq} {backend_name}",
                             workload="engine", latency=lat, metrics=metrics,
                             throughput=tokens_rate(tokens, lat),
                             plan=plan_for(params),
                             digests=[{"logits": digest(f"{mode}{batch}x{seq}")}] * 2,
                             checks=checks,
                             baseline={"latency_us": verdict("ok", 1.0 + rng.uniform(-0.02, 0.02), 0.03, 0.4),
                                       "kv_tokens": verdict("ok", 1.0)})
                records.append(rec)

# Checks with a failure, and baseline verdicts of every kind.
for rec in records:
    p = rec["params"]
    if rec["workload"] != "engine":
        continue
    if p["mode"] == "decode" and p["batch_size"] == 16 and p["seq_len"] == 4096 and p["allreduce"] == "auto":
        rec["checks"]["equal_across_allreduce"] = {
            "status": "fail",
            "detail": "auto vs nccl: logits differ (synthetic fixture failure); rel-L2 0.0031, "
                      "max abs 0.0078125 at index 3075; budget used 312%",
            "cases": [rec["case_id"]]}
    if p["mode"] == "decode" and p["batch_size"] == 64 and p["seq_len"] == 1024 and p["allreduce"] == "nccl":
        rec["baseline"]["latency_us"].update(verdict("regression", 1.09, 0.025, 0.003))
    if p["mode"] == "decode" and p["batch_size"] == 4 and p["seq_len"] == 128 and p["allreduce"] == "custom-oneshot":
        rec["baseline"]["latency_us"].update(verdict("improvement", 0.93, 0.02, 0.001))
    if p["mode"] == "prefill" and p["batch_size"] == 1 and p["seq_len"] == 512:
        rec["baseline"]["latency_us"] = dict(verdict("insufficient-data", 1.01), case_id=rec["case_id"],
                                             label=rec["label"], metric="latency_us")
    if p["mode"] == "prefill" and p["batch_size"] == 4 and p["seq_len"] == 2048 and p["allreduce"] == "auto":
        rec["baseline"] = {"case": {"verdict": "no-baseline", "ratio": 0.0, "old": 0.0, "new": 0.0,
                                    "detail": "no ok record of this case in the baseline",
                                    "case_id": rec["case_id"], "label": rec["label"], "metric": "case"}}
    if p["mode"] == "decode" and p["batch_size"] == 1 and p["seq_len"] == 128:
        rec["checks"]["observer_invariant"] = {"status": "not-implemented",
                                               "detail": "needs instrumentation=debug run",
                                               "cases": [rec["case_id"]]}

# --- mem_fraction sweep with plans and measured memory -------------------------------
for backend_name in ("nccl", "custom-oneshot"):
    for fraction in (0.45, 0.6, 0.7, 0.8, 0.9):
        params = base_params(batch_size=8, seq_len=2048, allreduce=backend_name,
                             mem_fraction=fraction)
        plan = plan_for(params)
        name = f"memory sweep mem_fraction={fraction} {backend_name}"
        if not plan["feasible"]:
            records.append(record(params, status="infeasible", label=name, workload="engine",
                                  plan=plan, error=plan["verdict"]))
            continue
        lat = latency(samples(engine_latency_us("decode", 8, 2048, backend_name)))
        checks = ok_checks({"plan_matches_measured": {
            "status": "pass", "detail": "every term within 5% of plan"}})
        if backend_name == "custom-oneshot" and fraction == 0.9:
            checks["plan_matches_measured"] = {
                "status": "fail", "detail": "comm_buffers measured 7.5% above plan (budget 5%)"}
        rec = record(params, label=name, workload="engine", latency=lat,
                     throughput=tokens_rate(8, lat),
                     plan=plan, memory=measured_for(plan, 2), checks=checks,
                     digests=[{"logits": digest(f"mf{fraction}{backend_name}")}] * 2,
                     baseline={"kv_tokens": verdict("ok", 1.0),
                               "memory.rank0.peak": verdict("ok", 1.003)})
        rec["metrics"] = [{"kv_tokens": int(plan["max_tokens"] * 0.995)}] * 2
        records.append(rec)

# --- control cases (first and last): same params as a sweep point, not drawn in plots ---
for role, factor in (("control-start", 1.0), ("control-end", 1.01)):
    params = base_params(batch_size=1, seq_len=128, allreduce="nccl")
    lat = latency(samples(engine_latency_us("decode", 1, 128, "nccl") * factor))
    records.append(record(params, role=role, label=f"decode bs=1 seq=128 nccl [{role}]",
                          workload="engine", latency=lat, plan=plan_for(params),
                          throughput=tokens_rate(1, lat), digests=[{"logits": digest("control")}] * 2,
                          metrics=[{"mode": "decode", "tokens_per_step": 1}] * 2))

# --- a failed and a skipped case -------------------------------------------------------
params = base_params(batch_size=64, seq_len=4096, allreduce="custom-twoshot")
records.append(record(params, status="failed", label="decode bs=64 seq=4096 custom-twoshot",
                      workload="engine", plan=plan_for(params),
                      error="rank 1 exited with status 134 (SIGABRT); stderr tail: "
                            "custom allreduce: IPC handle open failed (synthetic fixture)",
                      failed_ranks=[1]))
params = base_params(tp=4, batch_size=1, seq_len=1024, allreduce="nccl")
records.append(record(params, status="skipped", label="decode tp=4 bs=1 seq=1024 nccl",
                      workload="engine", error="needs 4 GPUs, found 2"))

scenario = {"schema": 1, "name": "fixture-h200x2-like-sweep",
            "description": "Synthetic fixture for the report tests; numbers are made up.",
            "workload": "engine", "device": "cuda", "mode": "decode", "model": MODEL,
            "measure": {"warmup": 2, "iterations": 10, "repetitions": 9},
            "sweep": {"tp": [2], "batch_size": [1, 4, 16, 64], "seq_len": [128, 1024, 4096],
                      "allreduce": ["nccl", "custom-oneshot", "auto"],
                      "mem_fraction": [0.85]},
            "checks": ["deterministic", "equal_across_allreduce", "plan_matches_measured"],
            "baseline": {"latency_rel_tol": 0.05, "memory_rel_tol": 0.02,
                         "kv_tokens_rel_tol": 0.01, "alpha": 0.05}}
# A check group that never completed: only run.json's summary knows it.
summary_checks = {"control_drift": [{"status": "fail", "detail": "cases of this group have no "
                                     "record (synthetic fixture)",
                                     "cases": ["00000000000dead0", "00000000000beef0"]}]}
run = {"schema": 1, "run_id": RUN_ID, "fixture": True, "provenance": FULL_PROVENANCE,
       "scenario": {"name": scenario["name"], "source": "/fixture/scenario.json",
                    "document": scenario, "device_resolved": "cuda"},
       "cases": [{"case_id": r["case_id"], "label": r["label"], "role": r["role"],
                  "params": r["params"],
                  "skip_reason": r["error"] if r["status"] == "skipped" else None} for r in records],
       "summary": {"cases": len(records), "checks": summary_checks, "exit_code": 1}}

with open(os.path.join(HERE, "results.jsonl"), "w") as f:
    for rec in records:
        f.write(json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n")
with open(os.path.join(HERE, "run.json"), "w") as f:
    json.dump(run, f, indent=1, sort_keys=True)
    f.write("\n")
print(f"wrote {len(records)} records")
