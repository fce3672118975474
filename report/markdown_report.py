"""summary.md in report.html's order: the headline, the results tables (allreduce per backend
and size, engine per mode, baseline deltas and geometric means), the cases that are not ok,
each plot (linked, the PNGs sit beside it), notable baseline verdicts, failed checks, and
provenance last, folded in <details>. Every table row carries its case_id.

Strings from results are escaped for Markdown tables (|, backticks, brackets, emphasis) and
for the HTML that Markdown renderers pass through (<, >, &), so a planted "<script>" stays
text.
"""

import html
import os

import output_files
import plots
import results_io as rio
import tables

_MD_SPECIAL = str.maketrans({"|": "\\|", "`": "\\`", "[": "\\[", "]": "\\]", "*": "\\*",
                             "\\": "\\\\", "\n": "<br>", "\r": ""})


def md(value):
    if value is None:
        return "-"
    return html.escape(str(value), quote=False).translate(_MD_SPECIAL)


def render_table(table, empty="none", limit=None):
    if not table.rows:
        return f"_{md(empty)}_\n"
    lines = ["| " + " | ".join(md(h) for h in table.headers) + " |",
             "|" + "|".join("---" for _ in table.headers) + "|"]
    rows = table.rows if limit is None else table.rows[:limit]
    for row in rows:
        lines.append("| " + " | ".join(md(tables.cell_text(v)) for v in row) + " |")
    if limit is not None and len(table.rows) > limit:
        lines.append(f"\n_{len(table.rows) - limit} more rows in report.html._")
    return "\n".join(lines) + "\n"


def render_kv(items):
    lines = ["| key | value |", "|---|---|"]
    lines += [f"| {md(k)} | {md(v)} |" for k, v in items]
    return "\n".join(lines) + "\n"


SECTION_TABLES = {"memory": lambda recs: tables.memory_table(recs)}
DATA_NOTES = {"allreduce": "Results: allreduce", "decode": "Results: decode",
              "prefill": "Results: prefill", "throughput": "Results: decode",
              "ttft": "Results: prefill", "roofline": "Results: decode (x roofline)",
              "speedup": "Results", "kv_tokens": "the memory table",
              "baseline": "Baseline verdicts"}


def one_line(title, note):
    """A section with nothing to show: one line, no heading."""
    return f"**{md(title)}**: {md(note)}\n"


def results_section(records):
    out = ["## Results", ""]
    allreduce = tables.allreduce_results(records)
    if allreduce:
        out += ["### Allreduce: time and bandwidth per message size", "",
                "As nccl-tests prints it, a table per backend: time is latency p50, p99 and mean per "
                "call, algbw = bytes / mean time, busbw = algbw x 2(n-1)/n, as recorded.", ""]
        for title, table in allreduce:
            out += [f"#### {md(title)}", "", render_table(table)]
    for mode, title in (("decode", "Decode: step latency and throughput"),
                        ("prefill", "Prefill: time to first token and throughput")):
        table = tables.engine_results(records, mode)
        if table.rows:
            out += [f"### {title}", "", render_table(table)]
    regressions = tables.regression_table(records)
    geomeans = tables.geomean_table(records)
    if geomeans.rows or regressions.rows:
        out += ["### Against the baseline", "",
                "Comparisons that are not plain ok (regressions first; Δ % = ratio - 1), then the "
                "geometric mean of new/old per metric over every case compared, as compare.py "
                "ends.", "", render_table(regressions, "every comparison is ok"),
                render_table(geomeans, "no ratios to average")]
    if len(out) == 2:
        return [one_line("Results", "no case recorded a result")]
    return out


def write(path, run, records, figures):
    name = rio.scenario_name(run)
    prov, prov_source = tables.provenance(run, records)
    out = [f"# tpbench report: {md(name)}", ""]
    if run.get("fixture"):
        out += ["> **FIXTURE: every number here is synthetic test data, not a measurement.**",
                ""]
    note = tables.placement_note(records)
    if note:
        out += [f"> **{md(note)}**", ""]
    word, line, failures = tables.verdict_banner(records, run)
    out += [f"**{md(word)}: {md(line)}**", ""]
    if failures:
        out += ["```", *failures, "```", ""]
    out += [md(tables.identity_line(run, records)), ""]
    out += results_section(records)
    not_ok = tables.not_ok_table(records)
    if not_ok.rows:
        out += ["## Cases not ok", "", render_table(not_ok), ""]
    else:
        out += [one_line("Cases not ok", "none, every case is ok")]
    for fig in figures:
        if isinstance(fig, plots.Skipped):
            out += [one_line(fig.title, f"not drawn: {fig.note}")]
            continue
        out += [f"## {md(fig.title)}", "",
                f"![{md(fig.title)}]({os.path.basename(fig.path)})", "", md(fig.caption), ""]
        table_fn = SECTION_TABLES.get(fig.key)
        if table_fn:
            out += [render_table(table_fn(records)), ""]
        elif fig.key in DATA_NOTES:
            out += [f"Data: {DATA_NOTES[fig.key]}, a row per case with its case_id.", ""]
    ran = tables.backends_ran_table(records)
    if ran.rows:
        out += ["## Allreduce backends as they ran", "", md(tables.backends_ran_caption(records)),
                "", render_table(ran), ""]
    else:
        out += [one_line("Allreduce backends as they ran", tables.backends_ran_caption(records)
                         + " Every case's allreduces ran on the backend it requested.")]
    cost = tables.comm_cost_table(records)
    if cost.rows:
        out += ["## Custom allreduce buffers in KV tokens", "",
                "NCCL's KV pool minus the custom backend's at the same TP and mem_fraction: the plan's "
                "max_tokens, and the smallest pool a rank measured.", "", render_table(cost), ""]
    notable = tables.baseline_table(records, only_notable=True)
    if notable.rows:
        out += ["## Baseline verdicts (all but ok and no-baseline)", "", render_table(notable), ""]
    else:
        out += [one_line("Baseline verdicts", "no regressions, improvements, noise or "
                         "insufficient data")]
    summary = tables.check_summary(records, run)
    if summary:
        out += ["## Conformance checks", ""]
        out += ["| check | results |", "|---|---|"]
        out += [f"| {md(name)} | " + md(", ".join(f"{n} {s}" for s, n in sorted(c.items())))
                + " |" for name, c in sorted(summary.items())]
        out += ["", "Checks that did not pass:", "",
                render_table(tables.conformance_table(records, run, only_failures=True),
                             "every check passed")]
        where = tables.localization_table(run)
        if where.rows:
            out += ["", "## Where failing checks' sides part", "",
                    "Each side rerun at instrumentation=digests (records `<case_id>.digests`); the first "
                    "collective whose output differs, with the differences over 64 values sampled across it.", "",
                    render_table(where, "")]
    else:
        out += [one_line("Conformance checks", "no checks recorded")]
    # Provenance and the run's bookkeeping last, collapsed (Markdown renderers such as
    # GitHub's show <details> folded).
    out += ["", "## Provenance", "", "<details><summary>"
            + md(f"{len(prov)} fields from {prov_source}") + "</summary>", "",
            render_kv(prov) if prov else "_no provenance recorded_\n", "</details>", "",
            "## Run", "", "<details><summary>run id, scenario, cases, summary</summary>", "",
            render_kv(tables.run_overview(run, records)), "</details>", ""]
    output_files.write_text(path, "\n".join(out) + "\n")
