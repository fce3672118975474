"""Reading and validating a results folder: results.jsonl (one case per line) and run.json.

The record format is ARCHITECTURE.md's "Results record". Validation is strict about what
the rest of the report relies on (each line one JSON object; case_id and status present,
status one of the four the spec names; the known sections having the right JSON type) and
tolerant of everything else: optional keys may be missing or null and unknown keys are
kept. Every problem is raised as ReportInputError naming the file, the line and the JSON
path, so `tpbench report` can print one clear line and exit 2.

The JSON itself is read as strictly as tpbench's C++ reads it (json_text.h), so that a file
`tpbench compare` or `--resume` refuses is refused here too, with the same rules: UTF-8 only,
no NaN or Infinity (not JSON), no number too large for a double, no key twice in an object,
no "\\u0000" or half a surrogate pair ("\\ud800") in a string, at most 64 levels of nesting,
and at most 64 MiB per line or file.
"""

import json
import math
import os

# "fallback": the requested allreduce backend carried none of the case's allreduces (another
# one ran, record.allreduce_ran says which); its numbers are not the requested backend's.
STATUSES = ("ok", "infeasible", "failed", "skipped", "fallback")


# schemas/record.schema.json's params, by type (null: an axis the case leaves unset).
PARAM_KINDS = {key: ("number", "null") for key in
               ("tp", "layers", "mem_fraction", "batch_size", "seq_len", "message_bytes")}
PARAM_KINDS.update({key: ("string", "null") for key in
                    ("quant", "instrumentation", "dtype", "allreduce", "mode")})
PARAM_KINDS["cuda_graph"] = ("boolean", "null")


class ReportInputError(Exception):
    """Bad input (a malformed results file or run.json); the CLI exits 2."""


# The limits of reference_engine/config/json_text.h (kJsonMaxDepth, kJsonMaxBytes).
JSON_MAX_DEPTH = 64
JSON_MAX_BYTES = 64 << 20


class _NotJson(Exception):
    """Raised from inside json.loads by the hooks below; the text is the problem."""


class _KeysOnce(dict):
    """An object as parsed, with the keys it named more than once (checked with its path
    after parsing, where the path is known)."""
    duplicates = ()


def _object(pairs):
    obj = _KeysOnce(pairs)
    if len(obj) != len(pairs):
        seen = set()
        obj.duplicates = [k for k, _ in pairs if k in seen or seen.add(k)]
    return obj


def _constant(name):
    raise _NotJson(f"{name}: JSON has no NaN or Infinity")


def _float(text):
    value = float(text)
    if not math.isfinite(value):
        raise _NotJson(f"the number {_cut(text, 24)} is too large for a double")
    return value


def _int(text):
    # As the C++ reader: an integer beyond 64 bits is read as a double (and refused past a
    # double's range), never as an arbitrarily long integer no plot or table could convert.
    if len(text) <= 20:
        value = int(text)
        if -2 ** 63 <= value < 2 ** 64:
            return value
    return _float(text)


def _cut(text, limit=60):
    return text if len(text) <= limit else f"{text[:limit - 3]}... ({len(text)} characters)"


def _json_path(parent, key):
    return f"{parent}[{key}]" if isinstance(key, int) else f"{parent}.{key}"


def _string_problem(text):
    if "\0" in text:
        return "\\u0000 (NUL)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:  # "\ud800" alone: an escape JSON allows, no character
        return f"\\u{ord(text[err.start]):04x}, half a surrogate pair (not a character)"
    return None


def _check_parsed(value):
    """Depth, duplicate keys, NUL and half surrogate pairs in strings, walked without
    recursion; the first problem as (json path, text), or None."""
    stack = [(value, "$", 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, (dict, list)) and depth > JSON_MAX_DEPTH:
            return path, f"nesting deeper than {JSON_MAX_DEPTH} levels"
        if isinstance(node, dict):
            if node.duplicates:
                return path, f'duplicate key "{_cut(node.duplicates[0])}"'
            for key, child in node.items():
                problem = _string_problem(key)
                if problem:
                    return path, f"a key holds {problem}"
                stack.append((child, _json_path(path, key), depth + 1))
        elif isinstance(node, list):
            stack.extend((child, _json_path(path, i), depth + 1) for i, child in enumerate(node))
        elif isinstance(node, str):
            problem = _string_problem(node)
            if problem:
                return path, f"a string holds {problem}"
    return None


def parse_json_bytes(data, where, what):
    """One JSON text (bytes) read with the rules above; raises ReportInputError
    "<where>[:<line>]: not valid JSON (<problem>); expected <what>"."""
    def refuse(problem, line=None):
        place = where if line is None else f"{where}:{line}"
        raise ReportInputError(f"{place}: not valid JSON ({problem}); expected {what}")

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        refuse(f"not UTF-8: byte 0x{data[err.start]:02x} at column {column}",
               line if data.count(b"\n") else None)
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_constant=_constant,
                           parse_float=_float, parse_int=_int)
    except json.JSONDecodeError as err:
        refuse(f"{err.msg} at column {err.colno}", err.lineno if text.count("\n") else None)
    except _NotJson as err:
        refuse(str(err))
    except RecursionError:
        refuse(f"nesting deeper than {JSON_MAX_DEPTH} levels")
    problem = _check_parsed(value)
    if problem:
        raise ReportInputError(
            f"{where}: {_cut(problem[0], 80)}: not valid JSON ({problem[1]}); expected {what}")
    return value


def _type_name(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def is_number(value):
    """A JSON number that can be plotted (not a boolean, not NaN/inf)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Validator:
    def __init__(self, where):
        self.where = where  # "<file>:<line>"

    def fail(self, path, expected, value):
        raise ReportInputError(
            f"{self.where}: {path}: expected {expected}, got {_type_name(value)} {_short(value)}")

    def expect(self, obj, key, path, kinds, required=False):
        """obj[key] must be one of kinds ("object", "array", "string", "number", "boolean",
        "null"); a missing key is fine unless required."""
        if key not in obj:
            if required:
                raise ReportInputError(f"{self.where}: {path}: required key missing")
            return None
        value = obj[key]
        actual = _type_name(value)
        if actual not in kinds:
            self.fail(path, " or ".join(kinds), value)
        return value


def _short(value):
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_record(rec, where):
    """Checks one parsed record; raises ReportInputError with the JSON path of the problem."""
    v = _Validator(where)
    if not isinstance(rec, dict):
        v.fail("$", "a JSON object (one case per line)", rec)
    v.expect(rec, "case_id", "$.case_id", ("string",), required=True)
    status = v.expect(rec, "status", "$.status", ("string",), required=True)
    if status not in STATUSES:
        raise ReportInputError(
            f"{where}: $.status: expected one of {', '.join(STATUSES)}, got {_short(status)}")
    params = v.expect(rec, "params", "$.params", ("object",), required=True)
    # The axes the tables and plots sort and group by: their types, as the record schema has
    # them; any other axis a scalar.
    for key, value in params.items():
        kinds = PARAM_KINDS.get(key, ("string", "number", "boolean", "null"))
        v.expect(params, key, f"$.params.{key}", kinds)
    v.expect(rec, "role", "$.role", ("string", "null"))
    v.expect(rec, "workload", "$.workload", ("string", "null"))
    v.expect(rec, "label", "$.label", ("string", "null"))
    v.expect(rec, "error", "$.error", ("string", "null", "object"))
    plan = v.expect(rec, "plan", "$.plan", ("object", "null"))
    if plan:
        bd = v.expect(plan, "breakdown", "$.plan.breakdown", ("object", "null"))
        for term, value in (bd or {}).items():
            if not is_number(value):
                v.fail(f"$.plan.breakdown.{term}", "a number of bytes", value)
        v.expect(plan, "max_tokens", "$.plan.max_tokens", ("number", "null"))
        v.expect(plan, "feasible", "$.plan.feasible", ("boolean", "null"))
    v.expect(rec, "memory", "$.memory", ("object", "array", "null"))
    lat = v.expect(rec, "latency", "$.latency", ("object", "null"))
    if lat:
        for key in ("p50", "p90", "p99", "mean"):
            v.expect(lat, key, f"$.latency.{key}", ("number", "null"))
        samples = v.expect(lat, "samples_us", "$.latency.samples_us", ("array", "null"))
        for i, s in enumerate(samples or []):
            if not is_number(s):
                v.fail(f"$.latency.samples_us[{i}]", "a number (microseconds)", s)
    tput = v.expect(rec, "throughput", "$.throughput", ("object", "null"))
    for key in ("tokens_per_s", "algbw_GBps", "busbw_GBps"):
        v.expect(tput or {}, key, f"$.throughput.{key}", ("number", "null"))
    checks = v.expect(rec, "checks", "$.checks", ("object", "null"))
    for name, check in (checks or {}).items():
        if not isinstance(check, dict):
            v.fail(f"$.checks.{name}", "an object {status, detail, ...}", check)
        v.expect(check, "status", f"$.checks.{name}.status", ("string",), required=True)
    baseline = v.expect(rec, "baseline", "$.baseline", ("object", "null"))
    for metric, entry in (baseline or {}).items():
        if not isinstance(entry, dict):
            v.fail(f"$.baseline.{metric}", "an object {verdict, ratio, ...}", entry)
        v.expect(entry, "verdict", f"$.baseline.{metric}.verdict", ("string",), required=True)
        for key in ("ratio", "ci_low", "ci_high", "p_value"):
            v.expect(entry, key, f"$.baseline.{metric}.{key}", ("number", "null"))
    v.expect(rec, "provenance", "$.provenance", ("object", "null"))
    ran = v.expect(rec, "allreduce_ran", "$.allreduce_ran", ("object", "null"))
    if ran:
        for key in ("requested", "backend", "verdict"):
            v.expect(ran, key, f"$.allreduce_ran.{key}", ("string",))
        v.expect(ran, "fallback", "$.allreduce_ran.fallback", ("string", "null"))
        entries = v.expect(ran, "ran", "$.allreduce_ran.ran", ("array",))
        for i, entry in enumerate(entries or []):
            if not isinstance(entry, dict):
                v.fail(f"$.allreduce_ran.ran[{i}]", "an object {backend, calls, bytes_min, bytes_max}", entry)
            v.expect(entry, "backend", f"$.allreduce_ran.ran[{i}].backend", ("string",), required=True)
            for key in ("calls", "bytes_min", "bytes_max"):
                v.expect(entry, key, f"$.allreduce_ran.ran[{i}].{key}", ("number",))
    return rec


def latest_per_case(records):
    """The last record of each case, in file order. results.jsonl is append-only: a case run
    again (`tpbench run --resume RUN --retry-failed`) appends a record that supersedes its
    earlier one, as the run's own verdicts do."""
    last = {rec["case_id"]: i for i, rec in enumerate(records)}
    return [rec for i, rec in enumerate(records) if last[rec["case_id"]] == i]


def _open_input(path, what):
    try:
        return open(path, "rb")
    except OSError as err:
        raise ReportInputError(f"{path}: cannot read ({err.strerror}); expected {what}") from None


def load_results(path):
    """Returns the records of results.jsonl in file order, each with "_line" (1-based) added.
    Blank lines are skipped (a crash may leave a trailing newline); anything else must be a
    valid record."""
    if not os.path.isfile(path):
        raise ReportInputError(f"{path}: no such file (expected the results.jsonl of a run)")
    records = []
    what = "one JSON object per line"
    with _open_input(path, "the results.jsonl of a run") as f:
        number = 0
        while True:
            try:
                # Bounded: a line of /dev/zero is refused at the limit, not read until memory
                # runs out.
                line = f.readline(JSON_MAX_BYTES + 1)
            except OSError as err:
                raise ReportInputError(f"{path}: cannot read ({err.strerror})") from None
            if not line:
                break
            number += 1
            where = f"{path}:{number}"
            if len(line) > JSON_MAX_BYTES:
                raise ReportInputError(f"{where}: longer than {JSON_MAX_BYTES >> 20} MiB "
                                       "(tpbench's limit for a JSON text)")
            if not line.strip():
                continue
            rec = parse_json_bytes(line.rstrip(b"\r\n"), where, what)
            validate_record(rec, where)
            rec["_line"] = number
            records.append(rec)
    return records


def load_run(path):
    """run.json (provenance, scenario, case list); {} when the file does not exist."""
    if not os.path.isfile(path):
        return {}
    with _open_input(path, "the run.json of a run") as f:
        try:
            data = f.read(JSON_MAX_BYTES + 1)
        except OSError as err:
            raise ReportInputError(f"{path}: cannot read ({err.strerror})") from None
    if len(data) > JSON_MAX_BYTES:
        raise ReportInputError(f"{path}: larger than {JSON_MAX_BYTES >> 20} MiB "
                               "(tpbench's limit for a JSON text)")
    run = parse_json_bytes(data, path, "the run.json of a run")
    if not isinstance(run, dict):
        raise ReportInputError(f"{path}: $: expected an object, got {_type_name(run)}")
    v = _Validator(path)
    v.expect(run, "provenance", "$.provenance", ("object", "null"))
    scenario = v.expect(run, "scenario", "$.scenario", ("object", "null"))
    if scenario:
        v.expect(scenario, "document", "$.scenario.document", ("object", "null"))
    summary = v.expect(run, "summary", "$.summary", ("object", "null"))
    if summary:
        checks = v.expect(summary, "checks", "$.summary.checks", ("object", "null"))
        for name, groups in (checks or {}).items():
            if not isinstance(groups, list):
                v.fail(f"$.summary.checks.{name}", "an array of group results", groups)
    cases = v.expect(run, "cases", "$.cases", ("array", "null"))
    for i, case in enumerate(cases or []):
        if not isinstance(case, dict):
            v.fail(f"$.cases[{i}]", "an object {case_id, ...}", case)
        v.expect(case, "case_id", f"$.cases[{i}].case_id", ("string",))
    v.expect(run, "fixture", "$.fixture", ("boolean", "null"))
    return run


# ---- tolerant accessors used by every section ----------------------------------------

def scenario_doc(run):
    """The scenario as written: run.json's scenario.document (what `tpbench run` stores),
    or the scenario object itself."""
    scenario = run.get("scenario") if isinstance(run.get("scenario"), dict) else {}
    doc = scenario.get("document")
    return doc if isinstance(doc, dict) else scenario


def scenario_name(run):
    scenario = run.get("scenario") if isinstance(run.get("scenario"), dict) else {}
    return scenario.get("name") or scenario_doc(run).get("name") or run.get("run_id") or "results"


def param(rec, name, default=None):
    return rec.get("params", {}).get(name, default)


def label(rec):
    """A human label: the record's own, else its non-default params."""
    text = rec.get("label")
    if isinstance(text, str) and text:
        return text
    params = rec.get("params", {})
    return " ".join(f"{k}={params[k]}" for k in sorted(params)) or rec["case_id"]


def backend(rec):
    value = param(rec, "allreduce")
    return str(value) if value is not None else "-"


def allreduce_ran(rec):
    """record.allreduce_ran (suite/measure/allreduce_ran.h), {} when the record has none."""
    value = rec.get("allreduce_ran")
    return value if isinstance(value, dict) else {}


def bytes_text(value):
    """A message size exactly, as the terminal writes it: "14 MiB", "14 KiB", "1028 B"."""
    if not is_number(value):
        return "?"
    value = int(value)
    for unit, size in (("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if value >= size and value % size == 0:
            return f"{value // size} {unit}"
    return f"{value} B"


def ran_text(rec):
    """The backends that carried the case's allreduces, smallest messages first:
    "custom-oneshot 24 calls (14 KiB), nccl 7 calls (14 MiB)"; None when not recorded."""
    ran = allreduce_ran(rec).get("ran")
    if not isinstance(ran, list):
        return None
    if not ran:
        return "no allreduce call counted"
    parts = []
    for entry in ran:
        lo, hi, calls = entry.get("bytes_min"), entry.get("bytes_max"), entry.get("calls")
        size = bytes_text(lo) + ("" if lo == hi else " to " + bytes_text(hi))
        parts.append(f"{entry.get('backend')} {calls} call{'' if calls == 1 else 's'} ({size})")
    return ", ".join(parts)


def latency(rec, key="p50"):
    lat = rec.get("latency") or {}
    value = lat.get(key)
    return value if is_number(value) else None


def _rank_results(rec):
    for key in ("ranks", "rank_results"):
        ranks = rec.get(key)
        if isinstance(ranks, list):
            return [r for r in ranks if isinstance(r, dict)]
    return []


def metric(rec, name):
    """A throughput-like metric: from throughput, then metrics, then rank 0's metrics."""
    metrics = rec.get("metrics")
    if isinstance(metrics, list):  # per rank (suite/runner/runner.cpp): rank 0's
        metrics = metrics[0] if metrics else None
    for section in (rec.get("throughput"), metrics):
        if isinstance(section, dict) and is_number(section.get(name)):
            return section[name]
    for rank in _rank_results(rec):
        metrics = rank.get("metrics")
        if isinstance(metrics, dict) and is_number(metrics.get(name)):
            return metrics[name]
    return None


def message_bytes(rec):
    value = param(rec, "message_bytes")
    if is_number(value):
        return value
    value = metric(rec, "bytes")
    return value if is_number(value) else None


def is_allreduce(rec):
    workload = rec.get("workload") or param(rec, "workload")
    return workload == "allreduce" or message_bytes(rec) is not None


# Memory terms in stacking order; aliases map what a planner or meter may call them.
MEMORY_TERMS = ("weights", "comm_buffers", "graph_pool", "activations", "kv_cache", "other")
MEMORY_TERM_LABELS = {
    "weights": "weights",
    "comm_buffers": "communicator buffers",
    "graph_pool": "CUDA-graph pool",
    "activations": "activations",
    "kv_cache": "KV cache",
    "other": "other",
}
_ALIASES = {
    "weights": "weights", "weight": "weights", "model_weights": "weights",
    "comm_buffers": "comm_buffers", "comm": "comm_buffers", "communicator": "comm_buffers",
    "communicator_buffers": "comm_buffers", "comm_buffer": "comm_buffers",
    "graph_pool": "graph_pool", "cuda_graph": "graph_pool", "graph": "graph_pool",
    "cuda_graph_pool": "graph_pool", "graphs": "graph_pool",
    "activations": "activations", "activation": "activations",
    "activation_peak": "activations", "activations_peak": "activations",
    "kv_cache": "kv_cache", "kv": "kv_cache", "kvcache": "kv_cache",
    "kv_pool": "kv_cache",  # the GPU engine's pool sized from mem_fraction
}
# Keys in a breakdown that are totals or limits, not a term that occupies memory.
_NOT_TERMS = ("total", "avail", "free", "rest", "slack", "limit", "budget", "capacity",
              "device", "reserved_fraction")


def canonical_term(key):
    """The stacking term a breakdown key belongs to, or None when it is not a term."""
    k = key.lower()
    for suffix in ("_bytes", "_b"):
        if k.endswith(suffix):
            k = k[: -len(suffix)]
    if k in _ALIASES:
        return _ALIASES[k]
    if any(word in k for word in _NOT_TERMS):
        return None
    return "other"


def normalize_breakdown(breakdown):
    """{term: bytes} with canonical terms (unknown terms summed into "other")."""
    out = {}
    for key, value in (breakdown or {}).items():
        term = canonical_term(key)
        if term is not None and is_number(value):
            out[term] = out.get(term, 0) + value
    return out


def plan_breakdown(rec):
    plan = rec.get("plan") or {}
    return normalize_breakdown(plan.get("breakdown"))


def _phase_used(phases, word):
    for name, value in phases.items():
        if word in name.lower() and isinstance(value, dict) and is_number(value.get("used_bytes")):
            return value["used_bytes"]
    return None


def _derived_breakdown(phases):
    """Breakdown from the meter's phases when no explicit breakdown was recorded: each term
    is the growth of used memory between the phases that allocate it."""
    order = [("init", None), ("comm", "comm_buffers"), ("weights", "weights"),
             ("kv", "kv_cache"), ("peak", "activations")]
    out, previous = {}, None
    for word, term in order:
        used = _phase_used(phases, word)
        if used is None:
            continue
        if previous is not None and term is not None:
            out[term] = max(0, used - previous)
        previous = used
    return out


def measured_memory(rec):
    """{rank: {"phases": {phase: {...}}, "breakdown": {term: bytes}}} from rec["memory"],
    which may be a list (index = rank unless an entry says "rank") or an object keyed by
    rank ("0", "1", ...), possibly under "ranks"/"per_rank"."""
    memory = rec.get("memory")
    if isinstance(memory, dict):
        for key in ("ranks", "per_rank"):
            if isinstance(memory.get(key), (list, dict)):
                memory = memory[key]
                break
    entries = []
    if isinstance(memory, list):
        for i, entry in enumerate(memory):
            if isinstance(entry, dict):
                entries.append((entry.get("rank", i), entry))
    elif isinstance(memory, dict):
        for key, entry in memory.items():
            rank = key[4:] if key.startswith("rank") else key
            if rank.isdigit() and isinstance(entry, dict):
                entries.append((int(rank), entry))
    out = {}
    for rank, entry in entries:
        phases = entry.get("phases")
        if not isinstance(phases, dict):
            phases = {k: v for k, v in entry.items()
                      if isinstance(v, dict) and ("used_bytes" in v or "free_bytes" in v)}
        breakdown = normalize_breakdown(entry.get("breakdown"))
        if not breakdown:
            breakdown = _derived_breakdown(phases)
        if not phases and not breakdown:
            continue  # a rank that measured nothing (no meter in this workload)
        out[int(rank) if str(rank).isdigit() else rank] = {"phases": phases,
                                                           "breakdown": breakdown}
    # Without meter data, the sizes a rank reports for what it allocated (rank metrics
    # such as weight_bytes, kv_cache_bytes) are the measured side.
    metrics = rec.get("metrics")
    if not out and isinstance(metrics, list):
        for i, entry in enumerate(metrics):
            if not isinstance(entry, dict):
                continue
            breakdown = {}
            for key, value in entry.items():
                k = key.lower()
                k = k[: -len("_bytes")] if k.endswith("_bytes") else None
                if k in _ALIASES and is_number(value):
                    term = _ALIASES[k]
                    breakdown[term] = breakdown.get(term, 0) + value
            if breakdown:
                out[i] = {"phases": {}, "breakdown": breakdown, "source": "rank metrics"}
    # The communicator reports its own buffers (rank result "comm": {memory_bytes}); use
    # that where the meter has no communicator term.
    comm = rec.get("comm")
    if isinstance(comm, list):
        for i, entry in enumerate(comm):
            if (isinstance(entry, dict) and is_number(entry.get("memory_bytes"))
                    and i in out and "comm_buffers" not in out[i]["breakdown"]
                    and out[i]["breakdown"]):
                out[i]["breakdown"]["comm_buffers"] = entry["memory_bytes"]
                out[i]["comm_source"] = f"comm[{i}].memory_bytes"
    return out


def comm_memory_bytes(rec):
    """{rank: bytes} the communicator reported allocating (record.comm[rank].memory_bytes)."""
    comm = rec.get("comm")
    out = {}
    for i, entry in enumerate(comm if isinstance(comm, list) else []):
        if isinstance(entry, dict) and is_number(entry.get("memory_bytes")):
            out[i] = entry["memory_bytes"]
    return out


def memory_sides(rec):
    """The planned and measured memory of each rank over the same terms, so a bar pair
    compares like with like: {rank: {"plan": {term: bytes}, "measured": {term: bytes},
    "sources": {(side, term): where}}}, or {} when the record has neither side.

    The communicator's buffers are a term on both sides wherever the record has them: the
    plan's comm_buffers where it plans them (the GPU planner does), else the communicator's
    own report (comm[rank].memory_bytes; the CPU planner plans weights alone) on both sides.
    Any other term one side lacks is listed in "missing" (side, term), never filled in."""
    planned = plan_breakdown(rec)
    measured = measured_memory(rec)
    comm = comm_memory_bytes(rec)
    if not planned and not measured:
        return {}
    ranks = sorted(measured, key=str) or list(range(max(1, int(param(rec, "tp") or 1))))
    out = {}
    for rank in ranks:
        plan = dict(planned)
        meas = dict((measured.get(rank) or {}).get("breakdown") or {})
        sources = {("plan", t): "plan.breakdown" for t in plan}
        sources.update({("measured", t): (measured.get(rank) or {}).get("source") or "memory"
                        for t in meas})
        if (measured.get(rank) or {}).get("comm_source"):
            sources[("measured", "comm_buffers")] = measured[rank]["comm_source"]
        if rank in comm:
            if "comm_buffers" not in plan and planned:
                plan["comm_buffers"] = comm[rank]
                sources[("plan", "comm_buffers")] = f"comm[{rank}].memory_bytes"
            if "comm_buffers" not in meas and meas:
                meas["comm_buffers"] = comm[rank]
                sources[("measured", "comm_buffers")] = f"comm[{rank}].memory_bytes"
        missing = []
        if plan and meas:
            missing = sorted([("plan", t) for t in meas if t not in plan]
                             + [("measured", t) for t in plan if t not in meas])
        out[rank] = {"plan": plan, "measured": meas, "sources": sources, "missing": missing}
    return out


def measured_kv_tokens(rec, rank=0):
    # The GPU engine's pool (memory[rank].kv_pool.tokens, sized from mem_fraction on the
    # rank's own readings): the measured side of the plan's max_tokens.
    memory = rec.get("memory")
    if isinstance(memory, list) and len(memory) > rank and isinstance(memory[rank], dict):
        pool = memory[rank].get("kv_pool")
        if isinstance(pool, dict) and is_number(pool.get("tokens")) and is_number(pool.get("mem_fraction")) \
                and pool["mem_fraction"] > 0:
            return pool["tokens"]
    metrics = rec.get("metrics")
    if isinstance(metrics, list):
        metrics = metrics[0] if metrics else None
    for section in (rec.get("memory"), rec.get("throughput"), metrics):
        if isinstance(section, dict) and is_number(section.get("kv_tokens")):
            return section["kv_tokens"]
    for rank in _rank_results(rec):
        metrics = rank.get("metrics")
        if isinstance(metrics, dict) and is_number(metrics.get("kv_tokens")):
            return metrics["kv_tokens"]
    return None


def error_text(rec):
    err = rec.get("error")
    if err is None:
        return ""
    if isinstance(err, dict):
        return err.get("message") or json.dumps(err, sort_keys=True)
    return str(err)
