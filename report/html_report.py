"""report.html: one self-contained page (CSS inline, PNGs embedded as base64, no scripts,
no external references), results first: the results tables (allreduce per backend and size,
engine per mode, baseline deltas), the cases not ok, each plot with its data, then checks,
and provenance collapsed at the end. A section with nothing to show is one line.

Every string that comes from a scenario or a result goes through esc() (html.escape with
quotes), including numbers, so a label such as "<script>" renders as text. The page has no
JavaScript at all: nothing in it can raise a console error.
"""

import base64
import html

import output_files
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
p.empty { margin: 6px 0; color: #444; } p.ident { color: #555; font-size: 0.95em; }
h4 { margin: 12px 0 2px 0; }
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


# Where each plot's numbers are listed: the results tables on top (allreduce, decode,
# prefill), or a table under the plot itself (memory).
DATA_LINKS = {"allreduce": ("results-allreduce", "Results: allreduce"),
              "decode": ("results-decode", "Results: decode"),
              "prefill": ("results-prefill", "Results: prefill"),
              "throughput": ("results-decode", "Results: decode"),
              "ttft": ("results-prefill", "Results: prefill"),
              "roofline": ("results-decode", "Results: decode (x roofline)"),
              "speedup": ("results", "Results"),
              "kv_tokens": ("memory-data", "the memory table"),
              "baseline": ("baseline-table", "Baseline verdicts")}
SECTION_TABLES = {"memory": lambda recs: tables.memory_table(recs)}


def one_line(key, title, note):
    """A section with nothing to show: one line, no heading."""
    return (f'<p class="empty" id="{esc(key)}"><strong>{esc(title)}</strong>: '
            f"{esc(note)}</p>")


def results_section(records):
    """The results tables: allreduce per backend like nccl-tests, engine per mode, and the
    comparisons with a baseline where the records carry them."""
    out = ['<h2 id="results">Results</h2>']
    allreduce = tables.allreduce_results(records)
    if allreduce:
        out.append('<h3 id="results-allreduce">Allreduce: time and bandwidth per message size'
                   "</h3>")
        out.append('<p class="caption">As nccl-tests prints it, a table per backend: time is '
                   "latency p50, p99 and mean per call, algbw = bytes / mean time, busbw = algbw x "
                   "2(n-1)/n, as recorded.</p>")
        for title, table in allreduce:
            out.append(f"<h4>{esc(title)}</h4>" + render_table(table))
    for mode, title in (("decode", "Decode: step latency and throughput"),
                        ("prefill", "Prefill: time to first token and throughput")):
        table = tables.engine_results(records, mode)
        if table.rows:
            out.append(f'<h3 id="results-{mode}">{esc(title)}</h3>' + render_table(table))
    regressions = tables.regression_table(records)
    geomeans = tables.geomean_table(records)
    if geomeans.rows or regressions.rows:
        out.append('<h3 id="results-baseline">Against the baseline</h3>')
        out.append('<p class="caption">Comparisons that are not plain ok (regressions '
                   "first; Δ % = ratio - 1), then the geometric mean of new/old per metric "
                   "over every case compared, as compare.py ends.</p>")
        out.append(render_table(regressions, "every comparison is ok"))
        out.append(render_table(geomeans, "no ratios to average"))
    if len(out) == 1:
        return [one_line("results", "Results", "no case recorded a result")]
    return out


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
    word, line, failures = tables.verdict_banner(records, run)
    out.append(f'<p class="headline verdict-{"pass" if word == "PASS" else "fail"}">'
               f'<strong>{esc(word)}</strong> {esc(line)}</p>')
    if failures:
        out.append('<pre class="failures">' + esc("\n".join(failures)) + "</pre>")
    out.append(f'<p class="ident">{esc(tables.identity_line(run, records))} · '
               '<a href="#provenance">provenance</a></p>')
    out += results_section(records)

    not_ok = tables.not_ok_table(records)
    if not_ok.rows:
        counts = tables.status_counts(records)
        out.append('<h2 id="cases">Cases not ok</h2><p>'
                   + esc(", ".join(f"{n} {s}" for s, n in counts.items())) + "</p>")
        out.append(render_table(not_ok))
    else:
        out.append(one_line("cases", "Cases not ok", "none, every case is ok"))

    shown = [f for f in figures if isinstance(f, plots.Figure)]
    out.append("<nav><ul>" + "".join(f'<li><a href="#{esc(f.key)}">{esc(f.title)}</a></li>'
                                     for f in shown) + "</ul></nav>")
    for fig in figures:
        if isinstance(fig, plots.Skipped):
            out.append(one_line(fig.key, fig.title, f"not drawn: {fig.note}"))
            continue
        out.append(f'<h2 id="{esc(fig.key)}">{esc(fig.title)}</h2>')
        out.append(f'<p class="caption">{esc(fig.caption)}</p>')
        out.append(_image(fig.path, fig.title))
        table_fn = SECTION_TABLES.get(fig.key)
        if table_fn:
            table = table_fn(records)
            out.append(f'<h3 id="{esc(fig.key)}-data">data ({len(table.rows)} rows, with '
                       f"case_id)</h3>{render_table(table)}")
        elif fig.key in DATA_LINKS:
            anchor, text = DATA_LINKS[fig.key]
            out.append(f'<p class="caption">Data: <a href="#{esc(anchor)}">{esc(text)}</a>, '
                       "a row per case with its case_id.</p>")

    ran = tables.backends_ran_table(records)
    if ran.rows:
        out.append('<h2 id="backends-ran">Allreduce backends as they ran</h2>'
                   f'<p class="caption">{esc(tables.backends_ran_caption(records))}</p>')
        out.append(render_table(ran))
    else:
        out.append(one_line("backends-ran", "Allreduce backends as they ran",
                            tables.backends_ran_caption(records)
                            + " Every case's allreduces ran on the backend it requested."))
    cost = tables.comm_cost_table(records)
    if cost.rows:
        out.append('<h2 id="comm-cost">Custom allreduce buffers in KV tokens</h2>'
                   '<p class="note">NCCL\'s KV pool minus the custom backend\'s at the same TP and '
                   'mem_fraction: the plan\'s max_tokens, and the smallest pool a rank measured.</p>')
        out.append(render_table(cost))
    verdicts = tables.baseline_table(records)
    if verdicts.rows:
        out.append('<h2 id="baseline-table">Baseline verdicts</h2>' + render_table(verdicts))
    else:
        out.append(one_line("baseline-table", "Baseline verdicts",
                            "no baseline comparisons recorded"))

    conformance = tables.conformance_table(records, run)
    if conformance.rows:
        out.append('<h2 id="conformance">Conformance checks</h2>')
        summary = tables.check_summary(records, run)
        out.append("<p>" + esc("; ".join(
            f"{name}: " + ", ".join(f"{n} {s}" for s, n in sorted(c.items()))
            for name, c in sorted(summary.items()))) + "</p>")
        out.append(render_table(conformance))
    else:
        out.append(one_line("conformance", "Conformance checks", "no checks recorded"))
    where = tables.localization_table(run)
    if where.rows:
        out.append('<h2 id="localization">Where failing checks\' sides part</h2>'
                   '<p class="note">Each side rerun at instrumentation=digests (records '
                   '&lt;case_id&gt;.digests); the first collective whose output differs, with the '
                   'differences over 64 values sampled across it.</p>')
        out.append(render_table(where))

    # Provenance and the run's bookkeeping last, collapsed: they say how, not what.
    out.append('<h2 id="provenance">Provenance</h2>')
    if prov:
        out.append(f"<details><summary>{len(prov)} fields from {esc(prov_source)}: build, "
                   f"toolchain, host, GPUs, environment</summary>{render_kv(prov)}</details>")
    else:
        out.append('<p class="note">no provenance recorded</p>')
    overview = tables.run_overview(run, records)
    out.append(f'<h2 id="run">Run</h2><details><summary>{len(overview)} fields: run id, '
               f"scenario, cases planned and recorded, summary</summary>{render_kv(overview)}"
               "</details>")
    out.append("</body></html>")
    output_files.write_text(path, "\n".join(out) + "\n")
