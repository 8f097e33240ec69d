"""The page's HTML: Jinja2 templates (`templates/`, autoescaped), the chart's geometry, the CSP.

Everything is rendered on the server (tables and inline SVG), no asset from elsewhere. The
page's one script, `templates/links.js`, is allowed by its hash in the Content-Security-Policy
and nothing else may run. Why it exists: Airflow's UI shows the page in an iframe sandboxed
without allow-top-navigation, so a `target='_top'` link is blocked there (a console error
only). Inside that iframe (same origin: the sandbox allows it) a plain click on such a link is
handed to the UI's own router instead: the URL pushed onto the top page's history and a
popstate event, which is how React Router learns of a navigation (Back returns to the page).
Opened directly, the page is its own top and the links navigate as usual.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from tokokita_airflow.status_page.auth import PREFIX
from tokokita_etl.runner.status import DateState

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: the script exactly as the page sends it (the file without its final newline)
LINKS_SCRIPT = (TEMPLATES / "links.js").read_text(encoding="utf-8").removesuffix("\n")
LINKS_SCRIPT_HASH = base64.b64encode(hashlib.sha256(LINKS_SCRIPT.encode()).digest()).decode()
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
       f"script-src 'sha256-{LINKS_SCRIPT_HASH}'; "
       "form-action 'self'; frame-ancestors 'self'; base-uri 'none'")

#: state -> colour (the strip, the table and the legend), in the legend's order
COLOURS = {DateState.DONE: "#2e7d32", DateState.DUE: "#1565c0", DateState.WAITING: "#64b5f6",
           DateState.MISSING: "#9e9e9e", DateState.NO_INPUT: "#ad1457",
           DateState.RUNNING: "#f9a825",
           DateState.FAILED: "#ef6c00", DateState.NEEDS_RERUN: "#8e24aa",
           DateState.BLOCKED: "#c62828",
           DateState.NOT_PROCESSED: "#6d4c41"}
#: chart text size (px, as the page's CSS sets it) and a generous average glyph width at it,
#: to make room for labels and legend lines
CHART_FONT_PX = 12
CHART_GLYPH_PX = 7.2
#: how many runs a row links to before it says "+N more"
RUNS_SHOWN = 4


def _float(value: Any) -> float | None:
    try:
        return None if isinstance(value, bool) or value is None else float(value)
    except (TypeError, ValueError):
        return None


def fmt(value: Any) -> str:
    """A count or amount as the page shows it: `1,234`, `1,234.50`, `yes`/`no`, or ''."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and _float(value) is not None:
        value = _float(value)
    if isinstance(value, int | float):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    return str(value)


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} s"


def _text_width(text: str) -> float:
    return len(text) * CHART_GLYPH_PX


ENV = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                  undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
ENV.filters.update(fmt=fmt, seconds=_seconds,
                   path_part=lambda value: quote(str(value), safe=""))
ENV.globals.update(prefix=PREFIX, colours=COLOURS, runs_shown=RUNS_SHOWN,
                   script=Markup(LINKS_SCRIPT))  # noqa: S704 - our own file, hashed in the CSP


def render(template: str, **context: Any) -> str:
    """`template` (a file in templates/) rendered with `context`, autoescaped."""
    return ENV.get_template(template).render(**context)


def unit(pipeline: Any) -> str:
    """What the page calls one partition of `pipeline`: a `date`, else its grain's unit (a
    partition is named by its first date: a week by its Monday)."""
    return "date" if pipeline.grain.unit == "day" else pipeline.grain.unit


def chart(rows: list[dict[str, Any]], pipeline: Any) -> dict[str, Any] | None:
    """The chart `pipeline` declares (`Pipeline.chart`): bars of a count per partition; lines
    of a share (0-100 %, right axis) and of a money amount (scaled to its maximum), each when
    declared; under them a legend, one line per series. A series is called by its column's
    label (or the chart's own words for it). The SVG is as wide and tall as its labels and
    legend need. None when the pipeline declares no chart, without rows, or when no row has
    a count for the bars (no success yet)."""
    declared = pipeline.chart
    if declared is None or not rows:
        return None
    columns = {column.key: column for column in pipeline.columns}
    words = {key: columns[key].label for key in (declared.bars, declared.share, declared.money)
             if key} | dict(declared.labels)
    per = unit(pipeline)
    bars = [(r["rows"] or {}).get(declared.bars) for r in rows]
    money = [_float(r.get(declared.money)) if declared.money else None for r in rows]
    if not any(isinstance(b, int | float) for b in bars):
        return None
    top_bar = max([b for b in bars if isinstance(b, int | float)] or [1]) or 1
    top_money = max([m for m in money if m is not None] or [1]) or 1
    left = max(60, round(_text_width(fmt(top_bar)) + 10))
    top, plot_w, plot_h = 10, max(len(rows) * 21, 300), 160
    step = plot_w / len(rows)
    # the first and last date, and each first of a month at least two bars from them
    last = len(rows) - 1
    labelled = {0, last} | {i for i, r in enumerate(rows)
                            if r["date"].endswith("-01") and 2 <= i <= last - 2}
    dates, share_pts, money_pts = [], [], []  # per date: its bar and its axis label, if any
    for i, r in enumerate(rows):
        x = left + i * step
        cx = x + step / 2
        bar = None
        if isinstance(bars[i], int | float):
            h = plot_h * bars[i] / top_bar
            bar = {"x": x + 2, "y": top + plot_h - h, "width": step - 4, "height": h,
                   "value": bars[i]}
        dates.append({"date": r["date"], "bar": bar, "label_x": cx if i in labelled else None})
        if declared.share and r.get(declared.share) is not None:
            share_pts.append((cx, top + plot_h * (1 - r[declared.share])))
        if money[i] is not None:
            money_pts.append((cx, top + plot_h * (1 - money[i] / top_money)))
    # the share line's class is `share`, the bars' and the money line's their keys
    series = [{"cls": cls, "colour": colour, "points": pts} for cls, pts, colour in
              (("share", share_pts, "#c62828"), (declared.money, money_pts, "#2e7d32")) if pts]
    keys = [("bar", "#90a4ae",
             f"{words[declared.bars]} per {per} (bars, left axis, max {fmt(top_bar)})")]
    named = [words[declared.bars]]
    if declared.share:
        whole = columns[declared.share].share_of[1]
        whole = columns[whole].label if whole in columns else whole
        keys.append(("line", "#c62828", f"{words[declared.share]} share of the {whole} rows "
                                        "(right axis)"))
        named.append(f"{words[declared.share]} share")
    if declared.money:
        keys.append(("line", "#2e7d32", f"{words[declared.money]} per {per} (scaled to its "
                                        f"maximum, {fmt(top_money)})"))
        named.append(words[declared.money])
    title = f"{pipeline.grain.name} " + (" and ".join(named) if len(named) < 3
                                          else f"{', '.join(named[:-1])} and {named[-1]}")
    line_h = CHART_FONT_PX + 6
    legend_top = top + plot_h + CHART_FONT_PX + 14
    legend = [{"kind": kind, "colour": colour, "label": label, "y": legend_top + n * line_h}
              for n, (kind, colour, label) in enumerate(keys)]
    width = max(left + plot_w + 50, left + 22 + max(_text_width(k[2]) for k in keys) + 10)
    return {"left": left, "top": top, "plot_w": plot_w, "plot_h": plot_h,
            "top_bar": top_bar, "bars": declared.bars, "bar_words": words[declared.bars],
            "right_axis": bool(declared.share), "title": title, "dates": dates,
            "series": series, "legend": legend, "font_px": CHART_FONT_PX, "width": width,
            "height": legend_top + len(keys) * line_h}
