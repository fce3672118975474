"""report.html: one self-contained page (CSS inline, PNGs embedded as base64, no scripts,
no external references), provenance first.

Every string that comes from a scenario or a result goes through esc() (html.escape with
quotes), including numbers, so a label such as "<script>" renders as text. The page has no
JavaScript at all: nothing in it can raise a console error.
"""

import base64
import html

import plots
import results_io as rio
import tables

CSS = """
body { font-family: system-ui, -apple-system, "DejaVu Sans", sans-serif; margin: 24px auto;
       max-width: 1500px; padding: 0 16px; color: #1b1b1b; line-height: 1.4; }
h1 { margin-bottom: 4px; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 4px;
     margin-top: 36px; }
.fixture { background: #fff3cd; border: 1px solid #e0b400; padding: 8px 12px;
           font-weight: bold; }
.headline { font-size: 1.1em; margin: 8px 0 16px 0; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #d0d0d0; padding: 3px 8px; text-align: left; vertical-align: top;
         white-space: pre-wrap; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fde2e0; } tr.warn td { background: #fff6d6; }
table.kv td:first-child { font-family: monospace; white-space: nowrap; }
code, .mono { font-family: "DejaVu Sans Mono", monospace; }
img.plot { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
p.note { color: #666; font-style: italic; } p.caption { color: #444; }
nav ul { columns: 3; } details { margin: 8px 0; } summary { cursor: pointer; }
.tablewrap { max-height: 520px; overflow: auto; }
"""


def esc(value):
    return html.escape("-" if value is None else str(value), quote=True)


def _cell(value):
    css = ' class="num"' if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
    return f"<td{css}>{esc(tables.cell_text(value))}</td>"


def render_table(table, empty="none"):
    if not table.rows:
        return f'<p class="note">{esc(empty)}</p>'
    out = ['<div class="tablewrap"><table><thead><tr>']
    out += [f"<th>{esc(h)}</th>" for h in table.headers]
    out.append("</tr></thead><tbody>")
    for row, css in zip(table.rows, table.classes):
        cls = f' class="{esc(css)}"' if css else ""
        out.append(f"<tr{cls}>" + "".join(_cell(v) for v in row) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def render_kv(items):
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in items)
    return f'<table class="kv"><tbody>{rows}</tbody></table>'


def _image(path, alt):
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    return f'<img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{data}">'


SECTION_TABLES = {
    "allreduce": lambda recs: tables.allreduce_table(recs),
    "decode": lambda recs: tables.engine_table(recs, "decode"),
    "prefill": lambda recs: tables.engine_table(recs, "prefill"),
    "memory": lambda recs: tables.memory_table(recs),
}


def write(path, run, records, figures):
    name = rio.scenario_name(run)
    prov, prov_source = tables.provenance(run, records)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>tpbench report: {esc(name)}</title><style>{CSS}</style></head><body>",
           f"<h1>tpbench report: {esc(name)}</h1>"]
    if run.get("fixture"):
        out.append('<p class="fixture">FIXTURE: every number on this page is synthetic test '
                   'data, not a measurement.</p>')
    note = tables.placement_note(records)
    if note:
        out.append(f'<p class="fixture">{esc(note)}</p>')
    out.append(f'<p class="headline">{esc(tables.headline(records, run))}</p>')
    out.append(f'<h2 id="provenance">Provenance</h2><p class="note">from {esc(prov_source)}</p>')
    out.append(render_kv(prov) if prov else '<p class="note">no provenance recorded</p>')
    out.append('<h2 id="run">Run</h2>' + render_kv(tables.run_overview(run, records)))

    sections = [("cases", "Cases not ok"), ("backends-ran", "Allreduce backends as they ran")] + [(f.key, f.title) for f in figures] + [
        ("baseline-table", "Baseline verdicts"), ("conformance", "Conformance checks")]
    out.append("<nav><ul>" + "".join(f'<li><a href="#{esc(k)}">{esc(t)}</a></li>'
                                     for k, t in sections) + "</ul></nav>")

    counts = tables.status_counts(records)
    out.append('<h2 id="cases">Cases not ok</h2><p>'
               + esc(", ".join(f"{n} {s}" for s, n in counts.items())) + "</p>")
    out.append(render_table(tables.not_ok_table(records), "every case is ok"))
    out.append('<h2 id="backends-ran">Allreduce backends as they ran</h2>'
               f'<p class="caption">{esc(tables.backends_ran_caption(records))}</p>')
    out.append(render_table(tables.backends_ran_table(records),
                            "every case's allreduces ran on the backend it requested"))

    for fig in figures:
        out.append(f'<h2 id="{esc(fig.key)}">{esc(fig.title)}</h2>')
        if isinstance(fig, plots.Skipped):
            out.append(f'<p class="note">No plot: {esc(fig.note)}.</p>')
            continue
        out.append(f'<p class="caption">{esc(fig.caption)}</p>')
        out.append(_image(fig.path, fig.title))
        table_fn = SECTION_TABLES.get(fig.key)
        if table_fn:
            table = table_fn(records)
            out.append(f"<details><summary>data ({len(table.rows)} rows, with case_id)"
                       f"</summary>{render_table(table)}</details>")

    cost = tables.comm_cost_table(records)
    if cost.rows:
        out.append('<h2 id="comm-cost">Custom allreduce buffers in KV tokens</h2>'
                   '<p class="note">NCCL\'s KV pool minus the custom backend\'s at the same TP and '
                   'mem_fraction: the plan\'s max_tokens, and the smallest pool a rank measured.</p>')
        out.append(render_table(cost))
    out.append('<h2 id="baseline-table">Baseline verdicts</h2>')
    out.append(render_table(tables.baseline_table(records), "no baseline comparisons recorded"))

    out.append('<h2 id="conformance">Conformance checks</h2>')
    summary = tables.check_summary(records, run)
    if summary:
        out.append("<p>" + esc("; ".join(
            f"{name}: " + ", ".join(f"{n} {s}" for s, n in sorted(c.items()))
            for name, c in sorted(summary.items()))) + "</p>")
    out.append(render_table(tables.conformance_table(records, run), "no checks recorded"))
    where = tables.localization_table(run)
    if where.rows:
        out.append('<h2 id="localization">Where failing checks\' sides part</h2>'
                   '<p class="note">Each side rerun at instrumentation=digests (records '
                   '&lt;case_id&gt;.digests); the first collective whose output differs, with the '
                   'differences over 64 values sampled across it.</p>')
        out.append(render_table(where))
    out.append("</body></html>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
