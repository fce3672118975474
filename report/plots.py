"""The report's figures. Each function takes the validated records, draws one PNG (Agg
backend only, no display) and returns a Figure descriptor, or a one-line note saying why
the section has no plot (the data for it is not in this run).

Grouping rule shared by every plot: a figure consumes some params as axes (x, panel,
series); any other param that varies among the records drawn is added to the series name,
so two different configurations never share a line silently.
"""

import json
import math
import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib import ticker  # noqa: E402

import output_files  # noqa: E402
import results_io as rio  # noqa: E402

GIB = 2 ** 30
DPI = 110
# Params that never distinguish a series (identity or bookkeeping, not configuration).
_IGNORED_PARAMS = {"case_id", "label", "repetition", "workload"}
BACKEND_ORDER = ("nccl", "custom-oneshot", "custom-twoshot", "auto", "shm", "mpi")


class Figure:
    def __init__(self, key, title, path, caption, case_ids, marked=None):
        self.key = key            # section key ("allreduce", "decode", ...)
        self.title = title
        self.path = path          # PNG file written
        self.caption = caption    # what is drawn and how the data was selected
        self.case_ids = case_ids  # the records the figure draws from
        # Failed and fallback cases the figure marks: [{"case_id", "status", "how"}]; also
        # in the PNG's "tpbench" text chunk with case_ids (see _save).
        self.marked = marked or []


class Skipped:
    def __init__(self, key, title, note):
        self.key = key
        self.title = title
        self.note = note          # one line: why there is no plot


def _backend_rank(name):
    return (BACKEND_ORDER.index(name) if name in BACKEND_ORDER else len(BACKEND_ORDER), name)


def _fmt(value):
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def varying_params(records, consumed):
    """Params (not in consumed) with more than one distinct value among records."""
    values = {}
    for rec in records:
        for key, value in rec.get("params", {}).items():
            if key in consumed or key in _IGNORED_PARAMS:
                continue
            values.setdefault(key, set()).add(repr(value))
    # A param missing in some records but present in others also varies.
    for key in list(values):
        if any(key not in rec.get("params", {}) for rec in records):
            values[key].add("<missing>")
    return sorted(k for k, v in values.items() if len(v) > 1)


def series_key(rec, extra):
    """(backend, ((param, value), ...)) identifying a line."""
    return (rio.backend(rec), tuple((k, _fmt(rio.param(rec, k))) for k in extra))


def mpl_text(text):
    """Text from a result, made literal for matplotlib ('$' would start mathtext)."""
    return str(text).replace("$", r"\$")


def series_name(key):
    backend, extra = key
    if not extra:
        return mpl_text(backend)
    return mpl_text(backend + " (" + ", ".join(f"{k}={v}" for k, v in extra) + ")")


def _sorted_series(keys):
    return sorted(keys, key=lambda k: (_backend_rank(k[0]), k[1]))


def series_colors(keys):
    """One colour per series, the same in every panel of a figure."""
    return {k: f"C{i % 10}" for i, k in enumerate(_sorted_series(keys))}


LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P")


def series_style(keys):
    """Colour, line style and marker per series, so lines that coincide stay visible."""
    out = {}
    for i, k in enumerate(_sorted_series(keys)):
        out[k] = {"color": f"C{i % 10}", "ls": LINE_STYLES[i % len(LINE_STYLES)],
                  "marker": MARKERS[i % len(MARKERS)]}
    return out


def _batch_lines(recs, extra):
    """{(seq_len, *the extra axes' values): {batch_size: record}}: the lines an engine plot
    draws through its batch sizes."""
    lines = {}
    for rec in recs:
        key = (rio.param(rec, "seq_len"),) + series_key(rec, extra)
        lines.setdefault(key, {})[rio.param(rec, "batch_size")] = rec
    return lines


def multi_point(series):
    """Drops series with a single x value when some series has several: a line plot needs
    two points, and single points usually belong to a sweep of another axis."""
    if any(len(points) > 1 for points in series.values()):
        return {k: v for k, v in series.items() if len(v) > 1}
    return series


def human_bytes(n):
    """Exact where the size is a whole number of KiB/MiB/GiB; odd sizes below 10 KiB in
    bytes (1028 B, not 1.00391 KiB); others to 3 significant digits."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale and n % scale == 0:
            return f"{int(n // scale)} {unit}"
    if n < 10 * 1024:
        return f"{n:g} B"
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:g} B"


def _bytes_axis(ax, sizes):
    """Log2 x axis with ticks at the message sizes drawn (thinned to at most 10)."""
    ax.set_xscale("log", base=2)
    sizes = sorted(set(sizes))
    step = max(1, math.ceil(len(sizes) / 10))
    ticks = sizes[::step]
    ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ticker.FixedFormatter([human_bytes(s) for s in ticks]))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    for lab in ax.get_xticklabels():
        lab.set_rotation(45)
        lab.set_horizontalalignment("right")


def _log_if_spans(ax, values, axis="y", decades=1.5):
    values = [v for v in values if v and v > 0]
    if values and max(values) / min(values) >= 10 ** decades:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        return True
    return False


def _int_axis(ax, values, axis="x"):
    """Batch sizes: log2 axis when they span a factor of 8 or more, ticks at the values."""
    values = sorted(set(values))
    set_scale = ax.set_xscale if axis == "x" else ax.set_yscale
    target = ax.xaxis if axis == "x" else ax.yaxis
    if values and values[0] > 0 and values[-1] / values[0] >= 8:
        set_scale("log", base=2)
    target.set_major_locator(ticker.FixedLocator(values))
    target.set_major_formatter(ticker.FixedFormatter([_fmt(v) for v in values]))
    target.set_minor_locator(ticker.NullLocator())


def _wrap(title, panels):
    """A figure title that fits over `panels` panels side by side (about 55 characters each)."""
    return "\n".join(textwrap.wrap(title, 55 * panels))


def _save(fig, out_dir, name, case_ids=(), marked=()):
    """Writes the PNG with a "tpbench" text chunk: JSON {"cases": the case_ids drawn,
    "failed"/"fallback": the case_ids marked}, so the picture names its records."""
    path = os.path.join(out_dir, name)
    meta = {"cases": sorted(set(case_ids))}
    for status in NOT_OK_MARKED:
        meta[status] = sorted({m["case_id"] for m in marked if m["status"] == status})
    try:
        output_files.write_atomically(path, lambda temporary: fig.savefig(
            temporary, format="png", dpi=DPI, metadata={"tpbench": json.dumps(meta, sort_keys=True)}))
    finally:
        plt.close(fig)
    return path



def _finish(fig, out_dir, filename, key, title, caption, ids, marked, extra, records):
    """Saves a plot of sweep records and completes its caption: the axes its series are also
    split by, and the failed and fallback cases it marks. The tail every such plot shares."""
    path = _save(fig, out_dir, filename, ids, marked)
    if extra:
        caption += " Series also split by: " + ", ".join(extra) + "."
    caption += marks_caption(marked, records)
    return Figure(key, title, path, caption, ids, marked)

def _sweep(rec):
    return rec.get("role") in (None, "", "sweep")


def _ok(records):
    """ok sweep cases: control and repeat cases re-run a sweep point (they feed the drift and
    determinism checks) and would draw a second value at the same x."""
    return [r for r in records if r["status"] == "ok" and _sweep(r)]


# ---- failed and fallback cases ----------------------------------------------------------
# A failed case has no number: it is marked at its x on the bottom edge of a panel. A
# fallback case ran on another backend than it asked for: its number is that backend's, so
# it is drawn at its value apart from the series (never joined to the requested backend's
# line). Both have a legend entry and are listed in the caption.

NOT_OK_MARKED = ("failed", "fallback")
MARK_STYLE = {"failed": {"marker": "X", "color": "firebrick", "ms": 10, "ls": "none",
                         "mec": "white", "mew": 0.8},
              "fallback": {"marker": "D", "color": "darkorange", "mfc": "none", "ms": 9,
                           "ls": "none", "mew": 2.0}}


def _not_ok(records, keep):
    """Failed and fallback sweep cases for which keep(record) holds."""
    return [r for r in records if r["status"] in NOT_OK_MARKED and _sweep(r) and keep(r)]


def _draw_marks(ax, recs, x_of, y_of):
    """Marks recs on ax: failed (and a fallback without a value) as a red X on the bottom
    edge at x_of(rec), a fallback at (x_of, y_of) as a hollow orange diamond; one legend
    entry per kind. Returns [{"case_id", "status", "how"}] for what was drawn."""
    marked = []
    edge, placed = [], []
    for rec in recs:
        x = x_of(rec)
        if not rio.is_number(x):
            continue
        y = y_of(rec) if rec["status"] == "fallback" else None
        (placed if rio.is_number(y) else edge).append((x, y, rec))
    if edge:
        failed = sum(1 for _, _, r in edge if r["status"] == "failed")
        text = (f"failed ({failed}): no result" if failed == len(edge)
                else f"failed/fallback without a value ({len(edge)})")
        ax.plot([x for x, _, _ in edge], [0.03] * len(edge), transform=ax.get_xaxis_transform(),
                clip_on=False, zorder=5, label=text, **MARK_STYLE["failed"])
        marked += [{"case_id": r["case_id"], "status": r["status"], "how": "bottom edge"}
                   for _, _, r in edge]
    if placed:
        ax.plot([x for x, _, _ in placed], [y for _, y, _ in placed], zorder=5,
                label=f"fallback ({len(placed)}): ran on another backend",
                **MARK_STYLE["fallback"])
        marked += [{"case_id": r["case_id"], "status": r["status"], "how": "at its value"}
                   for _, _, r in placed]
    return marked


def _marks_legend(ax, recs):
    """Legend-only entries for failed/fallback cases a plot has no place for."""
    marked = []
    for status in NOT_OK_MARKED:
        group = [r for r in recs if r["status"] == status]
        if group:
            names = ", ".join(rio.label(r) for r in group[:3]) + (" ..." if len(group) > 3 else "")
            ax.plot([], [], label=mpl_text(f"{status} ({len(group)}, not placed): {names}"),
                    **MARK_STYLE[status])
            marked += [{"case_id": r["case_id"], "status": status, "how": "legend only"}
                       for r in group]
    return marked


def _positive(value):
    return value if rio.is_number(value) and value > 0 else None


def _not_placed(marks):
    """The tail of a Skipped note: failed/fallback cases of a section with nothing to draw."""
    if not marks:
        return ""
    counts = {}
    for r in marks:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return " (" + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + \
        ": see Cases not ok)"


def marks_caption(marked, records):
    if not marked:
        return ""
    by_id = {r["case_id"]: r for r in records}
    seen, parts = set(), []
    for m in marked:
        if m["case_id"] in seen:
            continue
        seen.add(m["case_id"])
        parts.append(f"{rio.label(by_id[m['case_id']])} [{m['case_id']}] {m['status']}")
    return (" Marked: failed cases as a red X on the bottom edge (no result), fallback cases as "
            "a hollow orange diamond (the other backend's number): " + "; ".join(parts) + ".")


# ---- allreduce --------------------------------------------------------------------------

def allreduce_figure(records, out_dir):
    title = "Allreduce: latency, bus bandwidth and custom/NCCL ratio vs message size"
    recs = [r for r in _ok(records) if rio.is_allreduce(r) and rio.latency(r) is not None]
    marks = _not_ok(records, rio.is_allreduce)
    if not recs:
        return Skipped("allreduce", title, "no allreduce cases with latency in this run"
                       + _not_placed(marks))
    extra = varying_params(recs, {"allreduce", "message_bytes", "mode"})
    series = {}
    for rec in recs:
        series.setdefault(series_key(rec, extra), {})[rio.message_bytes(rec)] = rec
    keys = _sorted_series(series)
    style = series_style(keys)
    nccl_keys = {k[1]: k for k in keys if k[0] == "nccl"}
    ratio_keys = [k for k in keys if k[0] != "nccl" and k[1] in nccl_keys]

    panels = 3 if ratio_keys else 2
    fig, axes = plt.subplots(1, panels, figsize=(6.0 * panels, 5.2), constrained_layout=True)
    ax_lat, ax_bw = axes[0], axes[1]
    all_sizes, all_lat, all_bw = [], [], []
    for k in keys:
        pts = sorted(series[k].items())
        xs = [s for s, _ in pts]
        lat = [rio.latency(r) for _, r in pts]
        all_sizes += xs
        all_lat += lat
        ax_lat.plot(xs, lat, ms=4, label=series_name(k), **style[k])
        bw_pts = [(s, rio.metric(r, "busbw_GBps")) for s, r in pts]
        bw_pts = [(s, b) for s, b in bw_pts if b is not None and b > 0]
        if bw_pts:
            all_bw += [b for _, b in bw_pts]
            ax_bw.plot([s for s, _ in bw_pts], [b for _, b in bw_pts], ms=4,
                       label=series_name(k), **style[k])
    marked = _draw_marks(ax_lat, marks, rio.message_bytes, rio.latency)
    _draw_marks(ax_bw, marks, rio.message_bytes, lambda r: _positive(rio.metric(r, "busbw_GBps")))
    all_sizes += [rio.message_bytes(r) for r in marks if rio.is_number(rio.message_bytes(r))]
    ax_lat.set_title("latency (p50)")
    ax_lat.set_ylabel("latency p50 (µs)")
    ax_lat.set_yscale("log")
    ax_bw.set_title("bus bandwidth")
    ax_bw.set_ylabel("bus bandwidth (GB/s)")
    if all_bw:
        _log_if_spans(ax_bw, all_bw, decades=1.0)
    else:
        ax_bw.text(0.5, 0.5, "no busbw_GBps recorded", ha="center", transform=ax_bw.transAxes)
    for ax in (ax_lat, ax_bw):
        _bytes_axis(ax, all_sizes)
        ax.set_xlabel("message size (bytes per rank)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if ratio_keys:
        ax_r = axes[2]
        for k in ratio_keys:
            base = series[nccl_keys[k[1]]]
            pts = [(s, rio.latency(r) / rio.latency(base[s]))
                   for s, r in sorted(series[k].items()) if s in base and rio.latency(base[s])]
            ax_r.plot([s for s, _ in pts], [v for _, v in pts], ms=4,
                      label=series_name(k), **style[k])
        ax_r.axhline(1.0, color="black", lw=1, ls="--")
        ax_r.set_title("latency ratio backend / NCCL (< 1: faster than NCCL)")
        ax_r.set_ylabel("latency p50 ratio (backend / NCCL)")
        ax_r.set_xlabel("message size (bytes per rank)")
        _bytes_axis(ax_r, all_sizes)
        ax_r.grid(True, which="both", alpha=0.3)
        ax_r.legend(fontsize=8)
    if not ratio_keys:
        title = "Allreduce: latency and bus bandwidth vs message size (no NCCL series to compare)"
    fig.suptitle(title)
    caption = ("One line per backend; ok sweep cases; latency is the p50 of the timed "
               "iterations; bus bandwidth is not drawn where it is 0 (TP=1).")
    return _finish(fig, out_dir, "allreduce.png", "allreduce", title, caption,
                   [r["case_id"] for r in recs], marked, extra, records)


# ---- decode / prefill latency -----------------------------------------------------------

def _engine_records(records, mode):
    return [r for r in _ok(records) if not rio.is_allreduce(r)
            and rio.param(r, "mode") == mode and rio.latency(r) is not None
            and rio.param(r, "batch_size") is not None]


def _engine_marks(records, mode):
    return _not_ok(records, lambda r: not rio.is_allreduce(r) and rio.param(r, "mode") == mode
                   and rio.param(r, "batch_size") is not None)


def latency_figure(records, out_dir, mode):
    title = f"{mode.capitalize()} latency vs batch size, per sequence length and backend"
    recs = _engine_records(records, mode)
    marks = _engine_marks(records, mode)
    if not recs:
        return Skipped(mode, title, f"no {mode} cases with latency in this run"
                       + _not_placed(marks))
    consumed = {"allreduce", "batch_size", "seq_len", "mode"}
    extra = varying_params(recs, consumed)
    series = _batch_lines(recs, extra)
    kept = multi_point(series)
    dropped = len(series) - len(kept)
    recs = [r for points in kept.values() for r in points.values()]
    # Name series by what still varies among the records drawn.
    extra = varying_params(recs, consumed)
    seqs = sorted({rio.param(r, "seq_len") for r in recs + marks}, key=lambda s: (s is None, s))
    style = series_style({series_key(r, extra) for r in recs})
    marked = []
    cols = min(3, len(seqs))
    rows = math.ceil(len(seqs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.4 * cols, 4.4 * rows),
                             constrained_layout=True, squeeze=False)
    for i, seq in enumerate(seqs):
        ax = axes[i // cols][i % cols]
        panel = [r for r in recs if rio.param(r, "seq_len") == seq]
        series = {}
        for rec in panel:
            series.setdefault(series_key(rec, extra), {})[rio.param(rec, "batch_size")] = rec
        lat_values, batches = [], []
        for k in _sorted_series(series):
            pts = sorted(series[k].items())
            xs = [b for b, _ in pts]
            p50 = [rio.latency(r) for _, r in pts]
            p99 = [rio.latency(r, "p99") or rio.latency(r) for _, r in pts]
            ax.plot(xs, p50, ms=4, label=series_name(k), **style[k])
            ax.fill_between(xs, p50, p99, color=style[k]["color"], alpha=0.15, lw=0)
            lat_values += p50 + p99
            batches += xs
        here = [r for r in marks if rio.param(r, "seq_len") == seq]
        marked += _draw_marks(ax, here, lambda r: rio.param(r, "batch_size"), rio.latency)
        batches += [rio.param(r, "batch_size") for r in here]
        lat_values += [rio.latency(r) for r in here if rio.latency(r)]
        _int_axis(ax, batches)
        _log_if_spans(ax, lat_values)
        ax.set_title(mpl_text(f"seq_len = {_fmt(seq)}"))
        ax.set_xlabel("batch size (sequences)")
        ax.set_ylabel(f"{mode} step latency p50 (µs)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for j in range(len(seqs), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    fig.suptitle(_wrap(title + " (line: p50, band: p50 to p99)", cols))
    caption = f"ok {mode} cases; line p50, shaded band up to p99."
    if dropped:
        caption += (f" {dropped} configuration(s) with a single batch size not drawn "
                    "(they are in the tables).")
    return _finish(fig, out_dir, f"{mode}_latency.png", mode, title, caption,
                   [r["case_id"] for r in recs], marked, extra, records)


# ---- throughput vs latency (decode) and time to first token (prefill) --------------------
# The two plots users know from vLLM's and SGLang's serving benchmarks: what a batch buys in
# tokens/s against what it costs in step latency, and how long a prompt of batch x seq_len
# tokens takes before the first token. Both read the records' own numbers
# (throughput.tokens_per_s, latency.p50/p99); nothing is derived.

def throughput_latency_figure(records, out_dir):
    title = "Decode throughput vs step latency, per backend (points: batch size)"
    recs = [r for r in _engine_records(records, "decode")
            if rio.is_number(rio.metric(r, "tokens_per_s"))]
    marks = _engine_marks(records, "decode")
    if not recs:
        return Skipped("throughput", title, "no decode cases with latency and tokens/s in "
                       "this run" + _not_placed(marks))
    consumed = {"allreduce", "batch_size", "seq_len", "mode"}
    # As the latency plot: configurations with a single batch size (a sweep of another axis,
    # e.g. mem_fraction) stay in the tables.
    extra = varying_params(recs, consumed)
    recs = [r for points in multi_point(_batch_lines(recs, extra)).values() for r in points.values()]
    extra = varying_params(recs, consumed)
    seqs = sorted({rio.param(r, "seq_len") for r in recs + marks}, key=lambda s: (s is None, s))
    style = series_style({series_key(r, extra) for r in recs})
    cols = min(3, len(seqs))
    rows = math.ceil(len(seqs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.6 * rows),
                             constrained_layout=True, squeeze=False)
    marked = []
    for i, seq in enumerate(seqs):
        ax = axes[i // cols][i % cols]
        series = {}
        for rec in recs:
            if rio.param(rec, "seq_len") == seq:
                series.setdefault(series_key(rec, extra), {})[rio.param(rec, "batch_size")] = rec
        lat, tput = [], []
        for k in _sorted_series(series):
            pts = sorted(series[k].items())
            xs = [rio.latency(r) / 1000.0 for _, r in pts]
            ys = [rio.metric(r, "tokens_per_s") for _, r in pts]
            ax.plot(xs, ys, ms=5, label=series_name(k), **style[k])
            for (batch, _), x, y in zip(pts, xs, ys):
                ax.annotate(mpl_text(f"b={_fmt(batch)}"), (x, y), xytext=(4, 3),
                            textcoords="offset points", fontsize=7, color=style[k]["color"])
            lat += xs
            tput += ys
        here = [r for r in marks if rio.param(r, "seq_len") == seq]
        placed = [r for r in here if r["status"] == "fallback" and rio.latency(r)
                  and rio.is_number(rio.metric(r, "tokens_per_s"))]
        if placed:
            marked += _draw_marks(ax, placed, lambda r: rio.latency(r) / 1000.0,
                                  lambda r: rio.metric(r, "tokens_per_s"))
        marked += _marks_legend(ax, [r for r in here if r not in placed])
        _log_if_spans(ax, lat, axis="x")
        _log_if_spans(ax, tput)
        ax.set_title(mpl_text(f"seq_len = {_fmt(seq)}"))
        ax.set_xlabel("decode step latency p50 (ms)")
        ax.set_ylabel("throughput (tokens/s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for j in range(len(seqs), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    fig.suptitle(_wrap(title + " (up and left is better)", cols))
    caption = ("ok decode cases: throughput.tokens_per_s against latency.p50 per step, one line "
               "per backend through its batch sizes (labels b=N), a panel per seq_len.")
    return _finish(fig, out_dir, "throughput_latency.png", "throughput", title, caption,
                   [r["case_id"] for r in recs], marked, extra, records)


def ttft_figure(records, out_dir):
    title = "Prefill: time to first token vs prompt tokens (batch x seq_len)"
    recs = [r for r in _engine_records(records, "prefill")
            if rio.is_number(rio.param(r, "seq_len"))]
    marks = [r for r in _engine_marks(records, "prefill") if rio.is_number(rio.param(r, "seq_len"))]
    if not recs:
        return Skipped("ttft", title, "no prefill cases with latency in this run"
                       + _not_placed(marks))

    def tokens(rec):
        return rio.param(rec, "batch_size") * rio.param(rec, "seq_len")

    consumed = {"allreduce", "batch_size", "seq_len", "mode"}
    extra = varying_params(recs, consumed)
    series = {}
    for rec in recs:
        key = series_key(rec, extra)
        series.setdefault(key, {}).setdefault(rio.param(rec, "batch_size"), {})[
            rio.param(rec, "seq_len")] = rec
    colors = series_colors(series)
    batches = sorted({b for by_batch in series.values() for b in by_batch})
    markers = {b: MARKERS[i % len(MARKERS)] for i, b in enumerate(batches)}
    fig, ax = plt.subplots(figsize=(9, 5.4), constrained_layout=True)
    xs_all, ys_all = [], []
    for k in _sorted_series(series):
        for batch in sorted(series[k]):
            pts = sorted(series[k][batch].items())
            xs = [tokens(r) for _, r in pts]
            p50 = [rio.latency(r) / 1000.0 for _, r in pts]
            p99 = [(rio.latency(r, "p99") or rio.latency(r)) / 1000.0 for _, r in pts]
            ax.errorbar(xs, p50, yerr=[[0] * len(xs), [max(0.0, b - a) for a, b in zip(p50, p99)]],
                        color=colors[k], marker=markers[batch], ms=6, capsize=3, lw=1.2)
            xs_all += xs
            ys_all += p50 + p99
    marked = _draw_marks(ax, marks, tokens,
                         lambda r: rio.latency(r) / 1000.0 if rio.latency(r) else None)
    handles = [plt.Line2D([], [], color=colors[k], lw=2, label=series_name(k))
               for k in _sorted_series(series)]
    handles += [plt.Line2D([], [], color="gray", marker=markers[b], ls="none",
                           label=mpl_text(f"batch {_fmt(b)}")) for b in batches]
    handles += [h for h in ax.get_legend_handles_labels()[0]]
    if _log_if_spans(ax, xs_all, axis="x", decades=1.0):
        ax.set_xscale("log", base=2)
    _log_if_spans(ax, ys_all, decades=1.0)
    ax.set_xlabel("prompt tokens in the step (batch x seq_len)")
    ax.set_ylabel("time to first token: prefill p50 (ms), bar to p99")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(handles=handles, fontsize=8)
    ax.set_title(title, fontsize=11)
    caption = ("ok prefill cases: the prefill step's latency.p50 (bar to p99) is the time to the "
               "first token of every sequence in the batch; colour: backend, marker: batch size, "
               "a line joins one batch size over seq_len.")
    return _finish(fig, out_dir, "prefill_ttft.png", "ttft", title, caption,
                   [r["case_id"] for r in recs], marked, extra, records)


def _speedup_panels(recs, extra):
    """[(backend key, {(batch, seq): speedup}, [case ids])] against NCCL with the same extra
    params."""
    table = {}
    for rec in recs:
        cell = (rio.param(rec, "batch_size"), rio.param(rec, "seq_len"))
        table.setdefault(series_key(rec, extra), {})[cell] = rec
    panels = []
    for k in _sorted_series(table):
        base = table.get(("nccl", k[1]))
        if k[0] == "nccl" or not base:
            continue
        cells = {c: rio.latency(base[c]) / rio.latency(r) for c, r in table[k].items()
                 if c in base and rio.latency(r) and rio.latency(base[c])}
        if cells:
            ids = [table[k][c]["case_id"] for c in cells] + [base[c]["case_id"] for c in cells]
            panels.append((k, cells, ids))
    return panels


def speedup_figure(records, out_dir):
    title = "Speedup over NCCL (NCCL p50 / backend p50), batch x seq_len"
    consumed = {"allreduce", "batch_size", "seq_len", "mode"}
    panels = []  # (mode, backend key, {(batch, seq): speedup})
    used = []
    dropped = 0
    for mode in ("decode", "prefill"):
        recs = _engine_records(records, mode)
        found = _speedup_panels(recs, varying_params(recs, consumed))
        # Single cells belong to sweeps of another axis; a heatmap needs a grid.
        if any(len(cells) > 1 for _, cells, _ in found):
            dropped += sum(1 for _, cells, _ in found if len(cells) < 2)
            keep = {i for _, cells, ids in found if len(cells) > 1 for i in ids}
            recs = [r for r in recs if r["case_id"] in keep]
            found = _speedup_panels(recs, varying_params(recs, consumed))
        for k, cells, ids in found:
            panels.append((mode, k, cells))
            used += ids
    if not panels:
        return Skipped("speedup", title,
                       "needs engine cases with both NCCL and another backend at the same "
                       "batch size and seq_len; none in this run")
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.4 * rows),
                             constrained_layout=True, squeeze=False)
    marks = {mode: _engine_marks(records, mode) for mode in ("decode", "prefill")}
    marked = []
    values = [v for _, _, cells in panels for v in cells.values()]
    spread = max(abs(math.log(v)) for v in values) or 0.05
    norm = mcolors.LogNorm(vmin=math.exp(-spread), vmax=math.exp(spread))
    image = None
    for i, (mode, k, cells) in enumerate(panels):
        ax = axes[i // cols][i % cols]
        batches = sorted({c[0] for c in cells})
        seqs = sorted({c[1] for c in cells})
        grid = [[cells.get((b, s), float("nan")) for b in batches] for s in seqs]
        image = ax.imshow(grid, cmap="RdBu", norm=norm, origin="lower", aspect="auto")
        for yi, s in enumerate(seqs):
            for xi, b in enumerate(batches):
                v = cells.get((b, s))
                if v is not None:
                    ax.text(xi, yi, f"{v:.2f}×", ha="center", va="center", fontsize=9,
                            color="white" if abs(math.log(v)) > 0.6 * spread else "black")
        for rec in marks[mode]:
            cell = (rio.param(rec, "batch_size"), rio.param(rec, "seq_len"))
            if rio.backend(rec) == k[0] and cell[0] in batches and cell[1] in seqs:
                ax.plot(batches.index(cell[0]), seqs.index(cell[1]), zorder=5,
                        label=f"{rec['status']}: no speedup", **MARK_STYLE["failed"])
                marked.append({"case_id": rec["case_id"], "status": rec["status"],
                               "how": "heatmap cell"})
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
        ax.set_xticks(range(len(batches)), [mpl_text(_fmt(b)) for b in batches])
        ax.set_yticks(range(len(seqs)), [mpl_text(_fmt(s)) for s in seqs])
        ax.set_xlabel("batch size (sequences)")
        ax.set_ylabel("seq_len (tokens)")
        ax.set_title(f"{mode}: {series_name(k)}", fontsize=10)
    for j in range(len(panels), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    bar = fig.colorbar(image, ax=axes, label="speedup over NCCL (×, > 1: faster)", shrink=0.8)
    ticks = [math.exp(spread * f) for f in (-1, -0.5, 0, 0.5, 1)]
    bar.set_ticks(ticks)
    bar.set_ticklabels([f"{t:.2f}×" for t in ticks])
    bar.ax.yaxis.set_minor_locator(ticker.NullLocator())
    fig.suptitle(title)
    # A failed or fallback case without a panel of its backend is named in the figure.
    placed = {m["case_id"] for m in marked}
    rest = [r for mode in marks for r in marks[mode] if r["case_id"] not in placed]
    if rest:
        first = axes[0][0]
        marked += _marks_legend(first, rest)
        first.legend(fontsize=7, loc="upper left")
    path = _save(fig, out_dir, "speedup_heatmap.png", used, marked)
    caption = ("Per cell: NCCL latency p50 divided by the backend's at the same batch size "
               "and seq_len (blue: faster than NCCL, red: slower).")
    if dropped:
        caption += f" {dropped} single-cell configuration(s) not drawn."
    caption += marks_caption(marked, records)
    return Figure("speedup", title, path, caption, sorted(set(used)), marked)


# ---- memory -----------------------------------------------------------------------------

def _memory_groups(records):
    """{group key: {mem_fraction: record}}; per fraction the case with the largest
    batch x seq_len (the activation peak), among records with a plan or measured memory."""
    recs = [r for r in records if r.get("role") in (None, "", "sweep")
            and (rio.plan_breakdown(r) or rio.measured_memory(r))
            and rio.is_number(rio.param(r, "mem_fraction"))]
    extra = varying_params(recs, {"allreduce", "mem_fraction", "batch_size", "seq_len",
                                  "mode", "instrumentation", "message_bytes", "dtype"})
    groups = {}
    for rec in recs:
        key = series_key(rec, extra)
        fraction = rio.param(rec, "mem_fraction")
        size = (rio.param(rec, "batch_size") or 0) * (rio.param(rec, "seq_len") or 0)
        current = groups.setdefault(key, {}).get(fraction)
        has_measured = bool(rio.measured_memory(rec))
        if current is None or (has_measured, size) > (
                bool(rio.measured_memory(current)),
                (rio.param(current, "batch_size") or 0) * (rio.param(current, "seq_len") or 0)):
            groups[key][fraction] = rec
    return groups


def memory_figure(records, out_dir):
    title = "Memory per rank: planned vs measured, per mem_fraction"
    groups = _memory_groups(records)
    # Only groups with more than one fraction or any measured memory are worth a panel.
    groups = {k: g for k, g in groups.items()
              if len(g) > 1 or any(rio.measured_memory(r) for r in g.values())}
    if not groups:
        return Skipped("memory", title, "no cases with a memory plan breakdown or measured "
                       "memory per rank in this run")
    keys = _sorted_series(groups)[:6]
    # One unit for the figure, chosen by the largest bar (a CPU run holds MiB, a GPU GiB).
    largest, most_bars, from_metrics = 0, 0, False
    for key in keys:
        bars = 0
        for rec in groups[key].values():
            measured = rio.measured_memory(rec)
            from_metrics |= any(m.get("source") == "rank metrics" for m in measured.values())
            sides = rio.memory_sides(rec)
            largest = max([largest] + [sum(side[k].values()) for side in sides.values()
                                       for k in ("plan", "measured")])
            bars += 2 * max(1, len(sides))
        most_bars = max(most_bars, bars + len(groups[key]))
    unit, scale = next(((u, f) for u, f in (("GiB", 2 ** 30), ("MiB", 2 ** 20))
                        if largest >= f), ("KiB", 2 ** 10))
    width = min(16.0, max(8.0, 2.5 + 0.42 * most_bars))
    fig, axes = plt.subplots(len(keys), 1, figsize=(width, 4.8 * len(keys)),
                             constrained_layout=True, squeeze=False)
    colors = dict(zip(rio.MEMORY_TERMS, plt.get_cmap("tab10").colors))
    used = []
    comm_from_report = []  # case_ids whose planned comm term is the communicator's report
    missing_terms = set()  # (side, term) a side lacks
    for ax, key in zip(axes[:, 0], keys):
        fractions = sorted(groups[key])
        positions, labels, group_centres = [], [], []
        x = 0.0
        for fraction in fractions:
            rec = groups[key][fraction]
            used.append(rec["case_id"])
            sides = rio.memory_sides(rec)
            start = x
            top = 0.0
            for rank, side in sides.items():
                if side["sources"].get(("plan", "comm_buffers"), "").startswith("comm["):
                    comm_from_report.append(rec["case_id"])
                missing_terms.update(side["missing"])
                for kind, breakdown in (("plan", side["plan"]), ("meas", side["measured"])):
                    bottom = 0.0
                    for term in rio.MEMORY_TERMS:
                        value = (breakdown or {}).get(term, 0) / scale
                        reported = side["sources"].get(("plan" if kind == "plan" else "measured",
                                                         term), "").startswith("comm[")
                        if value > 0:
                            ax.bar(x, value, bottom=bottom, width=0.8, color=colors[term],
                                   hatch=("//" if kind == "meas" else "") + ("..." if reported else ""),
                                   edgecolor="white", linewidth=0.5)
                            bottom += value
                    top = max(top, bottom)
                    positions.append(x)
                    labels.append(f"r{rank} {kind if breakdown else 'none'}")
                    x += 1.0
            plan = rec.get("plan") or {}
            if plan.get("feasible") is False or rec["status"] == "infeasible":
                ax.annotate("infeasible", ((start + x - 1) / 2, top), xytext=(0, 4),
                            textcoords="offset points", ha="center", va="bottom",
                            fontsize=8, color="firebrick")
            group_centres.append(((start + x - 1) / 2, f"mem_fraction {_fmt(fraction)}"))
            x += 0.8
        ax.set_xticks(positions, minor=True)
        ax.set_xticklabels(labels, minor=True)
        ax.tick_params(axis="x", which="minor", labelsize=7, labelrotation=90)
        ax.set_xticks([c for c, _ in group_centres])
        ax.set_xticklabels([t for _, t in group_centres])
        ax.xaxis.remove_overlapping_locs = False
        ax.tick_params(axis="x", which="major", pad=62, length=0, labelrotation=0)
        ax.set_xlim(-0.7, max(x - 0.1, 7.0))  # a few bars stay bars, not walls
        ax.set_ylabel(f"device memory per rank ({unit})")
        ax.set_title(f"{series_name(key)} (plain: planned, hatched: measured)", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[t]) for t in rio.MEMORY_TERMS]
    names = [rio.MEMORY_TERM_LABELS[t] for t in rio.MEMORY_TERMS]
    handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="lightgray", hatch="...",
                                 edgecolor="white"))
    names.append("dotted: the communicator's report")
    axes[0, 0].legend(handles, names,
                      fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    path = _save(fig, out_dir, "memory.png", used)
    caption = ("Per mem_fraction the case with the largest batch x seq_len; for each rank the "
               "planned breakdown (plain) beside the measured one (hatched), over the same terms.")
    if comm_from_report:
        caption += (" The plan of " + ", ".join(sorted(set(comm_from_report))) + " has no "
                    "communicator term: both sides show the buffers the communicator reported "
                    "(comm[rank].memory_bytes).")
    if missing_terms:
        caption += " Terms one side does not record: " + ", ".join(
            f"{rio.MEMORY_TERM_LABELS.get(t, t)} (no {'plan' if side == 'plan' else 'measurement'})"
            for side, t in sorted(missing_terms)) + "."
    if from_metrics:
        caption += (" Where the run has no memory meter data, 'measured' is what each rank "
                    "reported allocating (weight_bytes, kv_cache_bytes, communicator "
                    "memory_bytes).")
    if len(groups) > len(keys):
        caption += f" {len(groups) - len(keys)} further configuration(s) not drawn."
    return Figure("memory", title, path, caption, used)



def kv_tokens_figure(records, out_dir):
    title = "KV-cache capacity (tokens) vs mem_fraction, per backend"
    groups = _memory_groups(records)
    series = {}
    for key, by_fraction in groups.items():
        pts = []
        for fraction, rec in sorted(by_fraction.items()):
            planned = (rec.get("plan") or {}).get("max_tokens")
            if rio.is_number(planned):
                pts.append((fraction, planned, rio.measured_kv_tokens(rec), rec["case_id"]))
        if pts:
            series[key] = pts
    if not series or all(len(p) < 2 for p in series.values()):
        return Skipped("kv_tokens", title, "needs plans (max_tokens) at two or more "
                       "mem_fraction values; not in this run")
    fig, ax = plt.subplots(figsize=(8, 5), constrained_layout=True)
    used = []
    style = series_style(series)
    for i, key in enumerate(_sorted_series(series)):
        pts = series[key]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ms=8 - 1.5 * (i % 3),
                label=f"{series_name(key)} planned", **style[key])
        meas = [(p[0], p[2]) for p in pts if p[2] is not None]
        if meas:
            ax.plot([m[0] for m in meas], [m[1] for m in meas], ls="none", marker="x", ms=10,
                    color=style[key]["color"], label=f"{series_name(key)} measured")
        zero = [p[0] for p in pts if p[1] == 0]
        if zero:
            ax.plot(zero, [0] * len(zero), ls="none", marker="v", ms=9, color="firebrick")
        used += [p[3] for p in pts]
    ax.set_xlabel("mem_fraction (share of device memory for static use)")
    ax.set_ylabel("KV-cache capacity (tokens)")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title + "\n(red triangle: infeasible, 0 tokens)", fontsize=11)
    path = _save(fig, out_dir, "kv_tokens.png", used)
    return Figure("kv_tokens", title, path,
                  "Planned max_tokens per mem_fraction (line); measured KV tokens where "
                  "recorded (x).", used)


# ---- weight-read roofline ---------------------------------------------------------------

def roofline_figure(records, out_dir):
    title = "Decode step time over the time to read its weights, vs batch size"
    recs = [r for r in _engine_records(records, "decode")
            if rio.is_number(rio.metric(r, "x_weight_read_time"))]
    if not recs:
        return Skipped("roofline", title, "no decode cases with a weight-read roofline "
                       "(metrics.x_weight_read_time: GPU engine cases) in this run")
    consumed = {"allreduce", "batch_size", "mode"}
    extra = varying_params(recs, consumed)
    series = {}
    for rec in recs:
        series.setdefault(series_key(rec, extra), {})[rio.param(rec, "batch_size")] = rec
    style = series_style(series)
    fig, ax = plt.subplots(figsize=(8, 5), constrained_layout=True)
    batches, used = [], []
    for k in _sorted_series(series):
        pts = sorted(series[k].items())
        ax.plot([b for b, _ in pts], [rio.metric(r, "x_weight_read_time") for _, r in pts],
                ms=5, label=series_name(k), **style[k])
        batches += [b for b, _ in pts]
        used += [r["case_id"] for _, r in pts]
    marks = _engine_marks(records, "decode")
    marked = _draw_marks(ax, marks, lambda r: rio.param(r, "batch_size"),
                         lambda r: rio.metric(r, "x_weight_read_time"))
    batches += [rio.param(r, "batch_size") for r in marks]
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.axhline(1.5, color="firebrick", lw=1, ls=":")
    _int_axis(ax, batches)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("batch size (sequences)")
    ax.set_ylabel("step p50 / weight-read time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title + "\n(dashed: the roofline; dotted: 1.5, the decode target)", fontsize=11)
    caption = ("metrics.x_weight_read_time of each ok decode case: the median step over "
               "metrics.step_weight_bytes (every weight the step read on a rank, with the routed "
               "experts the router chose) at metrics.copy_GBps, the copy bandwidth measured in "
               "the same process.")
    return _finish(fig, out_dir, "roofline.png", "roofline", title, caption, used, marked, extra, records)


# ---- baselines --------------------------------------------------------------------------

VERDICT_COLORS = {"regression": "#c0392b", "improvement": "#1e8449", "ok": "#2e86c1",
                  "noise": "#d68910", "insufficient-data": "#7f8c8d"}
MAX_BASELINE_ROWS = 40


def baseline_rows(records):
    """[(record, metric, entry)] for every baseline entry, regressions first."""
    rows = []
    for rec in records:
        for metric_name, entry in sorted((rec.get("baseline") or {}).items()):
            rows.append((rec, metric_name, entry))
    priority = {"regression": 0, "improvement": 1, "noise": 2, "insufficient-data": 3, "ok": 4}
    rows.sort(key=lambda r: (priority.get(r[2].get("verdict"), 5), r[0]["_line"], r[1]))
    return rows


def baseline_figure(records, out_dir):
    title = "Baselines: ratio to baseline per metric, with confidence interval"
    rows = [r for r in baseline_rows(records) if rio.is_number(r[2].get("ratio"))]
    if not rows:
        return Skipped("baseline", title, "no baseline comparisons with a ratio in this run")
    shown = rows[:MAX_BASELINE_ROWS]
    shown.reverse()  # regressions at the top
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.28 * len(shown)), constrained_layout=True)
    for y, (rec, metric_name, entry) in enumerate(shown):
        verdict = entry.get("verdict")
        color = VERDICT_COLORS.get(verdict, "black")
        ratio = entry["ratio"]
        lo, hi = entry.get("ci_low"), entry.get("ci_high")
        if rio.is_number(lo) and rio.is_number(hi):
            ax.errorbar(ratio, y, xerr=[[max(0, ratio - lo)], [max(0, hi - ratio)]],
                        fmt="o", color=color, ms=5, capsize=3)
        else:
            ax.plot(ratio, y, "o", mfc="none", color=color, ms=6)
    names = []
    for rec, metric_name, entry in shown:
        text = f"{rio.label(rec)} · {metric_name}"
        names.append(mpl_text(text if len(text) <= 70 else text[:67] + "..."))
    ax.set_yticks(range(len(shown)), names, fontsize=8)
    for tick, (_, _, entry) in zip(ax.get_yticklabels(), shown):
        if entry.get("verdict") == "regression":
            tick.set_color(VERDICT_COLORS["regression"])
            tick.set_fontweight("bold")
    ax.axvline(1.0, color="black", lw=1, ls="--")
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.set_xlabel("ratio to baseline (this run / baseline; for latency > 1 is slower)")
    ax.grid(True, axis="x", alpha=0.3)
    handles = [plt.Line2D([], [], marker="o", ls="none", color=c, label=v)
               for v, c in VERDICT_COLORS.items()]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.set_title(title)
    path = _save(fig, out_dir, "baseline.png", [r[0]["case_id"] for r in shown])
    caption = ("Points: ratio; bars: confidence interval; hollow: no interval; regressions "
               "in red and listed first.")
    if len(rows) > len(shown):
        caption += f" {len(rows) - len(shown)} further rows only in the table."
    return Figure("baseline", title, path, caption, [r[0]["case_id"] for r in shown])


def all_figures(records, out_dir):
    return [allreduce_figure(records, out_dir),
            latency_figure(records, out_dir, "decode"),
            latency_figure(records, out_dir, "prefill"),
            throughput_latency_figure(records, out_dir),
            ttft_figure(records, out_dir),
            roofline_figure(records, out_dir),
            speedup_figure(records, out_dir),
            memory_figure(records, out_dir),
            kv_tokens_figure(records, out_dir),
            baseline_figure(records, out_dir)]
