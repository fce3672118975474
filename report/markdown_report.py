"""summary.md: provenance first, then the headline, the cases that are not ok, each plot
(linked, the PNGs sit beside it) with its data table, notable baseline verdicts and failed
checks. Every table row carries its case_id.

Strings from results are escaped for Markdown tables (|, backticks, brackets, emphasis) and
for the HTML that Markdown renderers pass through (<, >, &), so a planted "<script>" stays
text.
"""

import html
import os

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


SECTION_TABLES = {
    "allreduce": lambda recs: tables.allreduce_table(recs),
    "decode": lambda recs: tables.engine_table(recs, "decode"),
    "prefill": lambda recs: tables.engine_table(recs, "prefill"),
    "memory": lambda recs: tables.memory_table(recs),
}


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
    out += ["## Provenance", "", f"_from {md(prov_source)}_", "",
            render_kv(prov) if prov else "_no provenance recorded_\n",
            "## Run", "", render_kv(tables.run_overview(run, records)),
            f"**{md(tables.headline(records, run))}**", "",
            "## Cases not ok", "", render_table(tables.not_ok_table(records), "every case is ok"),
            "## Allreduce backends as they ran", "", md(tables.backends_ran_caption(records)), "",
            render_table(tables.backends_ran_table(records),
                         "every case's allreduces ran on the backend it requested"), ""]
    for fig in figures:
        out += [f"## {md(fig.title)}", ""]
        if isinstance(fig, plots.Skipped):
            out += [f"_No plot: {md(fig.note)}._", ""]
            continue
        out += [f"![{md(fig.title)}]({os.path.basename(fig.path)})", "", md(fig.caption), ""]
        table_fn = SECTION_TABLES.get(fig.key)
        if table_fn:
            out += [render_table(table_fn(records)), ""]
    cost = tables.comm_cost_table(records)
    if cost.rows:
        out += ["## Custom allreduce buffers in KV tokens", "",
                "NCCL's KV pool minus the custom backend's at the same TP and mem_fraction: the plan's "
                "max_tokens, and the smallest pool a rank measured.", "", render_table(cost), ""]
    out += ["## Baseline verdicts (all but ok and no-baseline)", "",
            render_table(tables.baseline_table(records, only_notable=True),
                         "no regressions, improvements, noise or insufficient data"), ""]
    out += ["## Conformance checks", ""]
    summary = tables.check_summary(records, run)
    if summary:
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
        out += ["_no checks recorded_", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
