"""The report's tables, built once and rendered by both html_report and markdown_report.

A table is (headers, rows, classes): rows are lists of cells (str or number, None shown as
"-"), classes a per-row CSS class ("bad", "warn" or "") that the HTML uses to highlight
failures. Every row that carries a measured or planned number also carries its case_id, so
each number in the report can be traced to one line of results.jsonl.
"""

import json
import math

import results_io as rio

GIB = 2 ** 30


def num(value, digits=4):
    """A number for a table: integers as-is, others with `digits` significant digits."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):  # a quantity derived from finite ones that overflowed
            return str(value)
        if value == int(value) and abs(value) < 1e15:
            return int(value)
        return float(f"{value:.{digits}g}")
    return value


def cell_text(value):
    """How a table cell prints: floats with up to 6 significant digits, None as "-"."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def gib(value):
    return None if value is None else num(value / GIB, 4)


def text(value):
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


class Table:
    def __init__(self, headers):
        self.headers = headers
        self.rows = []
        self.classes = []

    def add(self, row, css=""):
        self.rows.append(row)
        self.classes.append(css)


def provenance(run, records):
    """[(key, value)] flattened from run.json's provenance, else the first record's."""
    prov = run.get("provenance")
    source = "run.json"
    if not isinstance(prov, dict):
        prov = next((r["provenance"] for r in records if isinstance(r.get("provenance"), dict)), {})
        source = "results.jsonl (first record)" if prov else "not recorded"
    items = []

    def walk(prefix, value):
        if isinstance(value, dict) and value and prefix.split(".")[-1] not in ("topology",):
            for key in sorted(value):
                walk(f"{prefix}.{key}" if prefix else key, value[key])
        elif prefix == "hosts" and isinstance(value, list) and all(isinstance(v, dict) for v in value):
            # provenance.hosts: the lines of each host the ranks ran on, under its host id.
            for i, host in enumerate(value):
                walk(f"hosts.{host.get('host_id', i)}", {k: v for k, v in host.items() if k != "host_id"})
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            items.append((prefix, ", ".join(value)))
        elif isinstance(value, bool):
            items.append((prefix, "true" if value else "false"))
        else:
            items.append((prefix, text(value) if not isinstance(value, str) else value))

    walk("", prov)
    # Provenance that differs between records (a run spread over builds) is worth a line.
    shas = {str(r["provenance"].get("git_sha")) for r in records
            if isinstance(r.get("provenance"), dict) and "git_sha" in r["provenance"]}
    if len(shas) > 1:
        items.append(("WARNING", "records carry different git shas: " + ", ".join(sorted(shas))))
    return items, source


def run_overview(run, records):
    scenario = rio.scenario_doc(run)
    items = []
    run_ids = sorted({str(r.get("run_id")) for r in records if r.get("run_id") is not None})
    items.append(("run_id", run.get("run_id") or ", ".join(run_ids) or None))
    items.append(("scenario", rio.scenario_name(run)))
    raw = run.get("scenario") if isinstance(run.get("scenario"), dict) else {}
    for key in ("source", "device_resolved"):
        if key in raw:
            items.append((f"scenario.{key}", text(raw[key])))
    for key in ("description", "workload", "device", "mode"):
        if key in scenario:
            items.append((f"scenario.{key}", text(scenario[key])))
    if "sweep" in scenario:
        items.append(("scenario.sweep", text(scenario["sweep"])))
    if "checks" in scenario:
        items.append(("scenario.checks", text(scenario["checks"])))
    if run.get("unstable"):
        items.append(("unstable", "control case drifted: regressions in this run are not trusted"))
    planned = run.get("cases")
    if isinstance(planned, list):
        items.append(("cases planned (run.json)", len(planned)))
        recorded = {r["case_id"] for r in records}
        missing = [c for c in planned if isinstance(c, dict) and c.get("case_id") not in recorded]
        if missing:
            items.append(("cases without a record",
                          f"{len(missing)} (run interrupted?): "
                          + ", ".join(str(c.get("case_id")) for c in missing[:10])
                          + (" ..." if len(missing) > 10 else "")))
    items.append(("records (results.jsonl)", len(records)))
    summary = run.get("summary")
    if isinstance(summary, dict):
        for key in ("cases", "ok", "failed", "skipped", "infeasible", "fallback", "exit_code", "end_time"):
            if key in summary:
                items.append((f"summary.{key}", text(summary[key])))
    if isinstance(run.get("resumed"), list) and run["resumed"]:
        items.append(("resumed", f"{len(run['resumed'])} time(s)"))
    return items


def status_counts(records):
    counts = {s: 0 for s in rio.STATUSES}
    for rec in records:
        counts[rec["status"]] += 1
    return counts


def placement_note(records):
    """One sentence for the top of both reports when ranks shared a GPU: their timings measure
    contention between ranks, not an interconnect (docs/placement.md); None otherwise."""
    shared = [rec["placement"] for rec in records
              if isinstance(rec.get("placement"), dict) and rec["placement"].get("ranks_per_gpu", 1) > 1]
    if not shared:
        return None
    per_gpu = sorted({p.get("ranks_per_gpu") for p in shared})
    mps = sorted({str(p.get("mps", "?")) for p in shared})
    return (f"Shared placement: {len(shared)} of {len(records)} cases ran with "
            f"{', '.join(str(n) for n in per_gpu)} ranks per GPU (MPS: {', '.join(mps)}). Their latencies "
            "and bandwidths measure ranks contending for one GPU, not an interconnect; they are never "
            "compared with exclusive-placement baselines.")


def headline(records, run=None):
    """One-line verdict counts for the top of both reports."""
    counts = status_counts(records)
    checks = check_rows(records, run)
    failed_checks = sum(1 for row in checks if row[3] == "fail")
    regressions = sum(1 for rec in records for e in (rec.get("baseline") or {}).values()
                      if e.get("verdict") == "regression")
    parts = [f"{counts[s]} {s}" for s in rio.STATUSES]
    # "0 regression(s)" where nothing was compared would read as a pass: say so instead.
    compared = any(rec.get("baseline") for rec in records)
    return (f"{len(records)} cases: " + ", ".join(parts) + f"; {failed_checks} failed check(s); "
            + (f"{regressions} baseline regression(s)" if compared else "no baseline compared"))


def verdict_banner(records, run=None):
    """The report's first line: (word, sentence, failures). word is PASS or FAIL as the run's exit
    status says (run.json summary.exit_code: 0 PASS, 3 NOTHING RAN, any other FAIL), or, for
    records without a finished run.json, FAIL where a case failed or fell back or a check or a
    baseline failed, else PASS; the sentence is the headline's counts; failures the run's
    "FAILED ..." lines (summary.failures), as the terminal printed them."""
    summary = (run or {}).get("summary") or {}
    code = summary.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        word = "PASS" if code == 0 else "NOTHING RAN" if code == 3 else "FAIL"
    else:
        counts = status_counts(records)
        failed = (counts["failed"] + counts["fallback"] > 0
                  or any(row[3] == "fail" for row in check_rows(records, run))
                  or any(e.get("verdict") in ("regression", "mismatch", "not-ok")
                         for rec in records for e in (rec.get("baseline") or {}).values()))
        word = "FAIL" if failed else "PASS"
    failures = [f for f in summary.get("failures") or [] if isinstance(f, str)]
    return word, headline(records, run), failures


def not_ok_table(records):
    table = Table(["case_id", "label", "status", "error / reason"])
    for rec in records:
        if rec["status"] != "ok":
            css = "bad" if rec["status"] in ("failed", "fallback") else "warn"
            table.add([rec["case_id"], rio.label(rec), rec["status"], rio.error_text(rec)], css)
    return table


def backends_ran_table(records):
    """Cases whose allreduces did not all run on the requested backend (suite/measure/allreduce_ran.h):
    fallbacks (status fallback: another backend carried every call), partial fallbacks (e.g.
    the messages above a custom buffer on NCCL), auto on NCCL alone, and ranks that disagree.
    Cases that ran as requested are left out; the caption says how many."""
    table = Table(["case_id", "label", "status", "requested", "ran", "verdict", "why"])
    order = {"fallback": 0, "partial-fallback": 1}
    notable = []
    for rec in records:
        ran = rio.allreduce_ran(rec)
        if not ran:
            continue
        if ran.get("verdict") == "as-requested" and ran.get("fallback") is None and "ranks_differ" not in ran:
            continue
        notable.append(rec)
    notable.sort(key=lambda r: (order.get(rio.allreduce_ran(r).get("verdict"), 2), r.get("_line", 0)))
    for rec in notable:
        ran = rio.allreduce_ran(rec)
        why = ran.get("fallback")
        if "ranks_differ" in ran:
            why = (why + "; " if why else "") + "ranks differ: " + str(ran["ranks_differ"])
        verdict = ran.get("verdict")
        css = "bad" if verdict == "fallback" else ("warn" if verdict == "partial-fallback" else "")
        table.add([rec["case_id"], rio.label(rec), rec["status"], text(ran.get("requested")), rio.ran_text(rec),
                   text(verdict), text(why)], css)
    return table


def backends_ran_caption(records):
    """One sentence over every case that recorded what carried its allreduces."""
    recorded = [r for r in records if rio.allreduce_ran(r)]
    if not recorded:
        return "No record says which backend carried its allreduces (recorded from this build on)."
    counts = {}
    for rec in recorded:
        verdict = rio.allreduce_ran(rec).get("verdict") or "?"
        counts[verdict] = counts.get(verdict, 0) + 1
    return (f"{len(recorded)} case(s) recorded which backend carried their allreduces: "
            + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
            + ". A fallback's numbers are the other backend's; it is never compared as the requested one.")


def allreduce_table(records):
    table = Table(["case_id", "label", "backend", "message bytes", "dtype", "tp", "p50 µs",
                   "p99 µs", "algbw GB/s", "busbw GB/s"])
    recs = [r for r in records if r["status"] == "ok" and rio.is_allreduce(r)]
    recs.sort(key=lambda r: (rio.backend(r), rio.message_bytes(r) or 0))
    for rec in recs:
        table.add([rec["case_id"], rio.label(rec), rio.backend(rec), num(rio.message_bytes(rec)),
                   text(rio.param(rec, "dtype")), rio.param(rec, "tp"),
                   num(rio.latency(rec)), num(rio.latency(rec, "p99")),
                   num(rio.metric(rec, "algbw_GBps")), num(rio.metric(rec, "busbw_GBps"))])
    return table


def engine_table(records, mode):
    table = Table(["case_id", "label", "backend", "batch", "seq_len", "p50 µs", "p90 µs",
                   "p99 µs", "tokens/s", "x weight read"])
    recs = [r for r in records if r["status"] == "ok" and not rio.is_allreduce(r)
            and rio.param(r, "mode") == mode and rio.latency(r) is not None]
    recs.sort(key=lambda r: (rio.param(r, "seq_len") or 0, rio.param(r, "batch_size") or 0,
                             rio.backend(r), r["_line"]))
    for rec in recs:
        table.add([rec["case_id"], rio.label(rec), rio.backend(rec),
                   rio.param(rec, "batch_size"), rio.param(rec, "seq_len"),
                   num(rio.latency(rec)), num(rio.latency(rec, "p90")),
                   num(rio.latency(rec, "p99")), num(rio.metric(rec, "tokens_per_s")),
                   num(rio.metric(rec, "x_weight_read_time"))])
    return table


def largest_batch(rec, kv_tokens):
    """The most sequences of this case's context (prompt plus decode steps, the plan's
    requested_tokens / batch) that kv_tokens hold: the largest batch x seq_len that fits."""
    plan = rec.get("plan") or {}
    batch = rio.param(rec, "batch_size")
    requested = plan.get("requested_tokens")
    if not (rio.is_number(kv_tokens) and rio.is_number(requested) and rio.is_number(batch)
            and batch > 0 and requested > 0):
        return None
    return int(kv_tokens // (requested / batch))


def memory_table(records):
    """Planned beside measured per rank, over the same terms (results_io.memory_sides): a
    planned communicator term taken from the communicator's report says so in "source"."""
    terms = [t for t in rio.MEMORY_TERMS]
    table = Table(["case_id", "backend", "mem_fraction", "rank", "source", "feasible",
                   "KV tokens", "max batch"] + [f"{rio.MEMORY_TERM_LABELS[t]} GiB" for t in terms])
    for rec in records:
        plan = rec.get("plan") or {}
        sides = rio.memory_sides(rec)
        if not sides:
            continue
        base = [rec["case_id"], rio.backend(rec), num(rio.param(rec, "mem_fraction"))]
        feasible = plan.get("feasible")
        css = "warn" if feasible is False else ""
        for rank, side in sides.items():
            if side["plan"]:
                where = "plan" + "".join(f" + {src}" for (kind, _), src in sorted(side["sources"].items())
                                         if kind == "plan" and src.startswith("comm["))
                table.add(base + [rank, where, text(feasible), num(plan.get("max_tokens")),
                                  num(largest_batch(rec, plan.get("max_tokens")))]
                          + [gib(side["plan"].get(t)) for t in terms], css)
            if side["measured"]:
                kv = rio.measured_kv_tokens(rec, rank if isinstance(rank, int) else 0)
                table.add(base + [rank, "measured", None, num(kv), num(largest_batch(rec, kv))]
                          + [gib(side["measured"].get(t)) for t in terms])
    return table


def comm_cost_table(records):
    """What a custom allreduce's buffers cost in KV tokens: for each TP and mem_fraction with an
    NCCL case and a custom one, the plan's max_tokens of each and the smallest pool any rank
    measured, and NCCL minus custom. Empty when the run has no such pair."""
    by_key = {}
    for rec in records:
        if rec.get("role", "sweep") != "sweep" or not is_number_like(rio.param(rec, "mem_fraction")) \
                or not rec.get("plan"):
            continue
        # Paired on every param but the backend: another swept axis never mixes two cases.
        params = {k: v for k, v in (rec.get("params") or {}).items() if k != "allreduce"}
        key = (rio.param(rec, "tp"), rio.param(rec, "mem_fraction"), json.dumps(params, sort_keys=True))
        by_key.setdefault(key, {})[rio.backend(rec)] = rec
    table = Table(["tp", "mem_fraction", "custom backend", "planned nccl", "planned custom", "planned cost",
                   "measured nccl", "measured custom", "measured cost"])
    for (tp, fraction, _), recs in sorted(by_key.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        nccl = recs.get("nccl")
        if nccl is None:
            continue
        for name, custom in sorted(recs.items()):
            if not name.startswith("custom"):
                continue
            planned = [(r.get("plan") or {}).get("max_tokens") for r in (nccl, custom)]
            measured = [_smallest_pool(r) for r in (nccl, custom)]
            def diff(pair):
                return pair[0] - pair[1] if all(is_number_like(v) for v in pair) else None
            table.add([tp, num(fraction), name, num(planned[0]), num(planned[1]), num(diff(planned)),
                       num(measured[0]), num(measured[1]), num(diff(measured))])
    return table


def is_number_like(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _smallest_pool(rec):
    """The smallest KV pool any rank measured (the group's pool), None when none ran."""
    if rec.get("status") != "ok":
        return None
    memory = rec.get("memory")
    ranks = range(len(memory)) if isinstance(memory, list) else []
    pools = [rio.measured_kv_tokens(rec, rank) for rank in ranks]
    pools = [p for p in pools if is_number_like(p)]
    return min(pools) if pools else None


def baseline_table(records, only_notable=False):
    table = Table(["case_id", "label", "metric", "verdict", "ratio", "CI low", "CI high",
                   "p-value"])
    from plots import baseline_rows  # shared ordering: regressions first
    for rec, metric_name, entry in baseline_rows(records):
        verdict = entry.get("verdict")
        if only_notable and verdict in ("ok", "no-baseline"):
            continue
        css = {"regression": "bad", "not-like-for-like": "bad", "noise": "warn",
               "insufficient-data": "warn"}.get(verdict, "")
        table.add([rec["case_id"], rio.label(rec), metric_name, verdict,
                   num(entry.get("ratio")), num(entry.get("ci_low")),
                   num(entry.get("ci_high")), num(entry.get("p_value"))], css)
    return table


def check_rows(records, run=None):
    """[case_id, label, check, status, detail, group cases]. A check's numbers (its largest
    difference and where) are in its detail, as the suite writes it. A check over a group of
    cases is recorded on the case that completed the group; groups that never completed
    appear only in run.json's summary, and are added from there."""
    rows, seen = [], set()
    for rec in records:
        for name, check in sorted((rec.get("checks") or {}).items()):
            cases = check.get("cases") if isinstance(check.get("cases"), list) else []
            seen.add((name, tuple(map(str, cases))))
            rows.append([rec["case_id"], rio.label(rec), name, text(check.get("status")),
                         text(check.get("detail")), ", ".join(map(str, cases)) or None])
    summary = (run or {}).get("summary")
    for name, groups in sorted(((summary or {}).get("checks") or {}).items()):
        for group in groups:
            if not isinstance(group, dict):
                continue
            cases = group.get("cases") if isinstance(group.get("cases"), list) else []
            if (name, tuple(map(str, cases))) in seen:
                continue
            rows.append([str(cases[0]) if cases else None, "(run.json summary)", name,
                         text(group.get("status")), text(group.get("detail")),
                         ", ".join(map(str, cases)) or None])
    return rows


def conformance_table(records, run=None, only_failures=False):
    # No columns for a check's numbers: records carry them in the detail only, and columns
    # that are always "-" told the reader nothing.
    table = Table(["case_id", "label", "check", "status", "detail", "group cases"])
    rows = check_rows(records, run)
    order = {"fail": 0, "pass": 3}
    rows.sort(key=lambda r: (order.get(r[3], 1), r[2]))
    for row in rows:
        status = row[3]
        if only_failures and status == "pass":
            continue
        # fail is a failure; skipped, not-implemented or a status this report does not
        # know are shown, not counted as failures.
        css = "bad" if status == "fail" else ("" if status == "pass" else "warn")
        table.add(row, css)
    return table


def localization_table(run=None):
    """Where failing checks' sides part (run.json summary.checks[].localization, from the
    digests reruns whose records are in results.jsonl under the ids in "reruns")."""
    table = Table(["check", "sides", "where", "layer", "forward", "inputs", "max abs diff", "max rel diff",
                   "rel-L2", "reruns"])
    summary = (run or {}).get("summary") or {}
    for name, groups in sorted((summary.get("checks") or {}).items()):
        for group in groups if isinstance(groups, list) else []:
            loc = group.get("localization") if isinstance(group, dict) else None
            if not isinstance(loc, dict):
                continue
            sides = " vs ".join(map(str, loc.get("sides") or []))
            reruns = ", ".join(map(str, loc.get("reruns") or []))
            if not loc.get("found"):
                table.add([name, sides, text(loc.get("sentence")), None, None, None, None, None, None, reruns], "warn")
                continue
            inputs = loc.get("inputs_equal")
            table.add([name, sides, text(loc.get("site")), num(loc.get("layer")), num(loc.get("forward")),
                       "equal" if inputs is True else ("differ" if inputs is False else "-"),
                       num(loc.get("max_abs_diff")), num(loc.get("max_rel_diff")), num(loc.get("rel_l2")),
                       reruns], "bad")
    return table


def check_summary(records, run=None):
    """{check name: {status: count}}"""
    out = {}
    for row in check_rows(records, run):
        counts = out.setdefault(row[2], {})
        counts[row[3]] = counts.get(row[3], 0) + 1
    return out


# ---- results first: what the run measured, before anything about how ---------------------
# Every row names its case_id; every number is a field of that record (or, for the baseline
# deltas and geometric means, arithmetic on the ratios the records carry). Failed, fallback,
# infeasible and skipped cases keep their rows, with "-" where they have no number.

STATUS_CSS = {"failed": "bad", "fallback": "bad", "infeasible": "warn", "skipped": "warn"}


def status_text(rec):
    """The status as a results row shows it: a fallback names what ran, a control or repeat
    case its role."""
    text_ = rec["status"]
    if text_ == "fallback" and rio.allreduce_ran(rec).get("backend"):
        text_ += f" (ran on {rio.allreduce_ran(rec)['backend']})"
    role = rec.get("role")
    if role not in (None, "", "sweep"):
        text_ += f" [{role}]"
    return text_


def _group_name(rec, extra):
    parts = [rio.backend(rec)] + [f"{k}={rio.param(rec, k)}" for k in extra]
    return " · ".join(str(p) for p in parts)


def allreduce_results(records):
    """[(title, Table)] like nccl-tests' output: one table per backend (and any other param
    that varies, e.g. tp or dtype), a row per message size: time (p50, p99, mean), algbw, busbw.
    The bandwidths come from the mean time (the record's throughput basis), so the mean is shown
    beside them: one statistic per column, said in its header."""
    from plots import varying_params, _backend_rank  # shared grouping rule
    recs = [r for r in records if rio.is_allreduce(r)]
    extra = varying_params(recs, {"allreduce", "message_bytes", "mode"})
    groups = {}
    for rec in recs:
        key = (_backend_rank(rio.backend(rec)),) + tuple(str(rio.param(rec, k)) for k in extra)
        groups.setdefault(key, []).append(rec)
    out = []
    for key in sorted(groups):
        table = Table(["size (B)", "size", "type", "time p50 µs", "time p99 µs", "time mean µs",
                       "algbw GB/s", "busbw GB/s", "status", "case_id"])
        rows = sorted(groups[key], key=lambda r: (rio.message_bytes(r) or 0,
                                                  r.get("role") not in (None, "", "sweep"),
                                                  r["_line"]))
        for rec in rows:
            size = rio.message_bytes(rec)
            table.add([num(size), rio.bytes_text(size) if size is not None else None,
                       text(rio.param(rec, "dtype")), num(rio.latency(rec)),
                       num(rio.latency(rec, "p99")), num(rio.latency(rec, "mean")),
                       num(rio.metric(rec, "algbw_GBps")),
                       num(rio.metric(rec, "busbw_GBps")), status_text(rec), rec["case_id"]],
                      STATUS_CSS.get(rec["status"], ""))
        out.append((_group_name(rows[0], extra), table))
    return out


def engine_results(records, mode):
    """One table per mode: a row per case (backend, tp, batch, seq_len), step latency p50/p99
    (for prefill: the time to first token), the mean step that tokens/s comes from, tokens/s,
    and the weight-read roofline ratio where the records have it (GPU decode)."""
    from plots import varying_params, _backend_rank
    recs = [r for r in records if not rio.is_allreduce(r) and rio.param(r, "mode") == mode]
    if not recs:
        return Table([])
    extra = varying_params(recs, {"allreduce", "batch_size", "seq_len", "mode", "tp"})
    roofline = any(rio.is_number(rio.metric(r, "x_weight_read_time")) for r in recs)
    step = "TTFT p50 µs" if mode == "prefill" else "step p50 µs"
    headers = (["backend", "tp", "batch", "seq_len"] + (["config"] if extra else [])
               + [step, "p99 µs", "mean µs", "tokens/s"] + (["x roofline"] if roofline else [])
               + ["status", "case_id"])
    table = Table(headers)
    recs.sort(key=lambda r: ([str(rio.param(r, k)) for k in extra], _backend_rank(rio.backend(r)),
                             rio.param(r, "tp") or 0, rio.param(r, "seq_len") or 0,
                             rio.param(r, "batch_size") or 0,
                             r.get("role") not in (None, "", "sweep"), r["_line"]))
    for rec in recs:
        row = [rio.backend(rec), rio.param(rec, "tp"), rio.param(rec, "batch_size"),
               rio.param(rec, "seq_len")]
        if extra:
            row.append(" ".join(f"{k}={rio.param(rec, k)}" for k in extra))
        row += [num(rio.latency(rec)), num(rio.latency(rec, "p99")), num(rio.latency(rec, "mean")),
                num(rio.metric(rec, "tokens_per_s"))]
        if roofline:
            row.append(num(rio.metric(rec, "x_weight_read_time")))
        row += [status_text(rec), rec["case_id"]]
        table.add(row, STATUS_CSS.get(rec["status"], ""))
    return table


def baseline_metric_entries(records):
    """[(record, metric, entry)] of the baseline comparisons the records carry: entries with
    a verdict and a ratio or old/new values (not the build and hardware notes beside them)."""
    out = []
    for rec in records:
        for metric_name, entry in sorted((rec.get("baseline") or {}).items()):
            if isinstance(entry, dict) and "verdict" in entry and (
                    "ratio" in entry or "old" in entry or "new" in entry):
                out.append((rec, metric_name, entry))
    return out


def _comparable_ratio(metric_name, entry):
    """The ratio a geometric mean takes (as tpbench compare: digests and non-positive ratios
    left out)."""
    ratio = entry.get("ratio")
    if metric_name.startswith("digest.") or not rio.is_number(ratio) or ratio <= 0:
        return None
    return ratio


def regression_table(records):
    """Baseline comparisons that are not plain ok, regressions first: old, new, delta, ratio."""
    table = Table(["label", "metric", "old", "new", "Δ %", "ratio", "verdict", "p-value",
                   "case_id"])
    order = {"regression": 0, "not-like-for-like": 1, "machine-drift": 2, "improvement": 3,
             "noise": 4, "insufficient-data": 5}
    rows = [(rec, m, e) for rec, m, e in baseline_metric_entries(records)
            if e.get("verdict") not in ("ok", "no-baseline")]
    rows.sort(key=lambda r: (order.get(r[2].get("verdict"), 6), r[0]["_line"], r[1]))
    for rec, metric_name, entry in rows:
        ratio = entry.get("ratio")
        delta = (ratio - 1) * 100 if _comparable_ratio(metric_name, entry) else None
        css = {"regression": "bad", "not-like-for-like": "bad", "noise": "warn",
               "insufficient-data": "warn", "machine-drift": "warn"}.get(entry.get("verdict"), "")
        table.add([rio.label(rec), metric_name, num(entry.get("old")), num(entry.get("new")),
                   num(delta, 3), num(ratio), text(entry.get("verdict")),
                   num(entry.get("p_value")), rec["case_id"]], css)
    return table


def geomean_table(records):
    """The geometric mean of new/old per metric over the cases compared, as Google
    Benchmark's compare.py and `tpbench compare` end their output."""
    logs, verdicts = {}, {}
    for rec, metric_name, entry in baseline_metric_entries(records):
        ratio = _comparable_ratio(metric_name, entry)
        if ratio is None:
            continue
        logs.setdefault(metric_name, []).append(math.log(ratio))
        counts = verdicts.setdefault(metric_name, {})
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    table = Table(["metric", "cases", "geomean new/old", "Δ %", "verdicts"])
    for metric_name in sorted(logs):
        mean = math.exp(sum(logs[metric_name]) / len(logs[metric_name]))
        table.add([metric_name, len(logs[metric_name]), num(mean), num((mean - 1) * 100, 3),
                   ", ".join(f"{n} {v}" for v, n in sorted(verdicts[metric_name].items()))],
                  "bad" if verdicts[metric_name].get("regression") else "")
    return table


def identity_line(run, records):
    """run id, scenario, git sha and host in one line for the top of both reports."""
    prov, _ = provenance(run, records)
    values = dict(prov)
    parts = [f"run {run.get('run_id') or next((r.get('run_id') for r in records if r.get('run_id')), '?')}",
             f"scenario {rio.scenario_name(run)}"]
    sha = values.get("git_sha")
    if sha:
        parts.append(f"git {str(sha)[:12]}" + (" (dirty)" if values.get("dirty") == "true" else ""))
    for key in ("host", "hostname", "gpus", "device"):
        if values.get(key):
            parts.append(f"{key} {values[key]}")
    return " · ".join(parts)
