"""The page, step 5 of the report path: `render_page` renders ``index.html`` from the frames, tables
and figure files it is given; `lenbench.report.build` loads the source and writes the directory.

rows (`lenbench.report.rows`) → statistics (`lenbench.report.stats`) → tables (`lenbench.report.tables`,
`lenbench.report.cost`) → figures (`lenbench.report.plots`) → page (this module) → build
(`lenbench.report.build`). Nothing imports this module but the build.

``index.html`` is one self-contained file: inline CSS and JavaScript, the figures as ``data:`` URIs
(`screen_png`: at screen resolution; the print files lie beside it), no network access and no
external URL. Per task (and training length): the main table (scores ± 95 % half-widths, shared
ranks "=2", not-learned marks), the scores by length ratio and one table per encoding with
inference-time variants; every table sorts by a click on its header and filters by the text typed
above it, and scrolls sideways in its own box with the entry's name held at its left edge: the page
is as wide as the window however many columns a board has (tests/report/test_page_layout.py measures
it in a headless browser). Then the overall ranking, the figures (`Figure`), each with its caption:
the ``CAPTION`` of its plot module, kept there once so docs can quote it, and the panels it left
out, the cost view (when the source is a benchmark JSON with kernel timings) and a provenance
footer. The lede defines the tables' terms; "effective length" is
`lenbench.report.markdown.EFFECTIVE_LENGTH`. The cells are the strings of `leaderboard.md`
(`lenbench.report.markdown.board_table_rows`), so the two never disagree.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import re
from pathlib import Path

import pandas as pd
from PIL import Image

from lenbench.report.formatting import fmt_seconds, fmt_times
from lenbench.report.markdown import (
    EFFECTIVE_LENGTH,
    OVERALL_HEADER,
    OVERALL_NOTE,
    RANK_MARKS,
    board_align,
    board_degrades,
    board_header,
    board_second,
    board_table_rows,
    by_ratio_table,
    floor_sentence,
    learnability_lines,
    learnability_note,
    overall_lines,
    variant_table,
)
from lenbench.report.plots._style import DPI
from lenbench.report.secondary import ranking_note
from lenbench.report.tables import Leaderboard

# --- index.html ---------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d232a;background:#fafbfc}
header,main,footer{max-width:1180px;margin:0 auto;padding:0 20px;overflow-wrap:anywhere}
header{padding-top:18px}h1{font-size:24px;margin:8px 0 4px}h2{margin-top:34px;border-bottom:1px solid #d8dee4;padding-bottom:4px}
h3{font-size:15px;margin:22px 0 6px}.lede{color:#57606a;max-width:900px}
nav a{margin-right:14px;color:#0b5cad;text-decoration:none}nav a:hover{text-decoration:underline}
.scroll{overflow-x:auto;max-width:100%;margin:6px 0 4px}
table{border-collapse:separate;border-spacing:0;background:#fff;font-variant-numeric:tabular-nums;
border-top:1px solid #d8dee4;border-left:1px solid #d8dee4}
th,td{border-right:1px solid #d8dee4;border-bottom:1px solid #d8dee4;padding:3px 9px;white-space:nowrap;background:#fff}
th{background:#eef1f4;cursor:pointer;user-select:none;text-align:left}
th.key,td.key{position:sticky;left:0;z-index:1;box-shadow:1px 0 0 #d8dee4}
th.sorted-asc::after{content:" \\25B2";font-size:10px}th.sorted-desc::after{content:" \\25BC";font-size:10px}
td.r{text-align:right}tr.nl td{color:#8c959f;font-style:italic}tr.baseline td{color:#57606a;background:#f6f8fa}
td.rank1{font-weight:700;color:#116329}.filter{margin:6px 0;padding:3px 6px;width:260px;border:1px solid #c7ced6;border-radius:4px}
.note{color:#57606a;font-size:12.5px;max-width:1000px}figure{margin:14px 0}figure img{max-width:100%;margin:0 6px 6px 0;vertical-align:top;border:1px solid #e1e4e8;background:#fff}
figcaption{color:#57606a;font-size:12.5px}details{margin:8px 0}footer{margin-top:40px;padding-bottom:30px;color:#57606a;font-size:12.5px;border-top:1px solid #d8dee4}
footer dt{font-weight:600;float:left;clear:left;width:170px}footer dd{margin:0 0 2px 180px}
"""

_JS = """
function sortKey(td){var v=td.getAttribute('data-v');if(v!==null&&v!==''){return parseFloat(v);}return td.textContent.trim().toLowerCase();}
document.querySelectorAll('table.lb').forEach(function(table){
  var ths=table.querySelectorAll('thead th');
  ths.forEach(function(th,col){th.addEventListener('click',function(){
    var asc=!th.classList.contains('sorted-asc');ths.forEach(function(h){h.classList.remove('sorted-asc','sorted-desc');});
    th.classList.add(asc?'sorted-asc':'sorted-desc');var body=table.tBodies[0];var rows=Array.from(body.rows);
    rows.sort(function(a,b){var x=sortKey(a.cells[col]),y=sortKey(b.cells[col]);
      if(typeof x==='number'&&typeof y==='number'){if(isNaN(x))return 1;if(isNaN(y))return -1;return asc?x-y:y-x;}
      x=String(x);y=String(y);return asc?x.localeCompare(y):y.localeCompare(x);});
    rows.forEach(function(r){body.appendChild(r);});});});
});
document.querySelectorAll('input.filter').forEach(function(input){
  input.addEventListener('input',function(){var q=input.value.toLowerCase();
    document.querySelectorAll('table[data-group="'+input.getAttribute('data-group')+'"] tbody tr').forEach(function(tr){
      tr.style.display=tr.textContent.toLowerCase().indexOf(q)>=0?'':'none';});});
});
"""


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _sort_value(cell: str) -> str:
    """A numeric sort key of a formatted cell ("=2" → 2, "0.912 ± 0.01" → 0.912, "n/l" → NaN), or ""."""
    head = cell.split(" ")[0].lstrip("=").rstrip("×")
    if cell in ("n/l", "n/a", "–", "fail"):
        return "NaN"
    try:
        return repr(float(head))
    except ValueError:
        return ""


def _html_table(header: list[str], rows: list[list[str]], align: list[str], group: str,
                row_classes: list[str] | None = None, key: int = 0) -> str:
    """One table of the page in its own horizontally scrolling box (the page itself never scrolls
    sideways, however many columns a board has), its column `key` (the entry's name) sticky at the
    box's left edge while the other columns scroll under it.

    Args:
        header: the column names.
        rows: the cells, already formatted (`lenbench.report.markdown.board_table_rows` …).
        align: per column, "r" (numbers: right-aligned, sorted numerically) or "l".
        group: the filter group (`_filter`) the table belongs to.
        row_classes: per row, a CSS class ("nl", "baseline") or "".
        key: the index of the column naming the row.
    """
    def classes(j: int, cell: str = "") -> str:
        names = ["r" if align[j] == "r" else "", "rank1" if j == 0 and cell in ("1", "=1") else "",
                 "key" if j == key else ""]
        joined = " ".join(c for c in names if c)
        return f' class="{joined}"' if joined else ""

    head = "".join(f"<th{classes(j)}>{_esc(h)}</th>" for j, h in enumerate(header))
    lines = []
    for i, row in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        cells = []
        for j, cell in enumerate(row):
            sort_key = _sort_value(cell) if align[j] == "r" else ""
            value = f' data-v="{_esc(sort_key)}"' if sort_key else ""
            cells.append(f"<td{classes(j, cell)}{value}>{_esc(cell)}</td>")
        lines.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return (f'<div class="scroll" tabindex="0"><table class="lb" data-group="{_esc(group)}"><thead><tr>{head}</tr>'
            f"</thead><tbody>{''.join(lines)}</tbody></table></div>")


def _filter(group: str, what: str) -> str:
    return f'<input class="filter" type="search" data-group="{_esc(group)}" placeholder="filter {_esc(what)}…">'


def _row_classes(table: pd.DataFrame) -> list[str]:
    return ["nl" if r["not_learned"] else ("baseline" if r["kind"] == "baseline" else "")
            for r in table.to_dict("records")]


def _task_section(board: Leaderboard, task: str, train_len: int, rows: pd.DataFrame) -> list[str]:
    metric = rows["metric"].iloc[0]
    hib = bool(rows["higher_is_better"].iloc[0])
    anchor = f"{task}-{train_len}"
    group = f"t-{anchor}"
    parts = [f'<section id="{_esc(anchor)}"><h2>{_esc(task)} <small>(train length {train_len}, '
             f'{_esc(metric)} {"↑" if hib else "↓"})</small></h2>']
    methods = sorted(set(rows.loc[rows["kind"] != "baseline", "ci_method"]))
    if methods:
        parts.append(f'<p class="note">Intervals: {_esc("; ".join(methods))}.</p>')
    parts.append(_filter(group, f"{task} tables"))
    second = board_second(rows)
    note = ranking_note(rows)
    if note:
        parts.append(f'<p class="note"><strong>{_esc(note)}</strong></p>')
    floor = floor_sentence(rows)
    if floor:
        parts.append(f'<p class="note">{_esc(floor)}</p>')
    main = rows[rows["kind"].isin(["model", "baseline"])]
    parts.append(_html_table(board_header(metric, hib, second, board_degrades(rows)), board_table_rows(main, "rank", metric),
                             board_align(second, board_degrades(rows)), group, _row_classes(main), key=1))
    wide, ratio_cols, lines = by_ratio_table(board, task, train_len, rows)
    if ratio_cols:
        parts.append(f"<h3>{_esc(metric)} by length ratio (mean over seeds ± 95 % half-width)</h3>")
        parts.append(_html_table(["encoding", *ratio_cols], lines, ["l", *["r"] * len(ratio_cols)], group,
                                 _row_classes(wide)))
    parts.append("<h3>Learnability at the training length</h3>")
    parts.append(f'<p class="note">{_esc(learnability_note(metric, hib, task))}</p>')
    parts.append(_html_table(["entry", "learnability (95 % interval)", "per seed: in-dist"],
                             learnability_lines(board, task, train_len, main), ["l", "l", "l"], group))
    for encoding in dict.fromkeys(rows.loc[rows["kind"] == "variant", "encoding"]):
        table = variant_table(rows, encoding)
        parts.append(f"<h3>{_esc(encoding)} and its inference-time variants (ranked among themselves)</h3>")
        parts.append(_html_table(board_header(metric, hib, second, board_degrades(rows)), board_table_rows(table, "variant_rank", metric),
                                 board_align(second, board_degrades(rows)), group, _row_classes(table), key=1))
    parts.append("</section>")
    return parts


def _cost_section(cost: pd.DataFrame) -> list[str]:
    parts = ['<section id="cost"><h2>What it costs</h2>',
             '<p class="note">Medians of <code>bench/test_kernels.py</code>. <em>fused</em>: the fastest '
             "non-reference implementation; <em>copy ×</em>: fused time over a plain copy of the same bytes (1 = the "
             "memory-bandwidth floor); <em>SDPA ×</em>: fused time over unbiased causal SDPA at the same length; "
             "<em>training step</em>: the quick-suite training step relative to <code>nope</code>'s.</p>",
             _filter("cost", "cost tables")]
    header = ["encoding", "kind", "T", "dtype", "fused", "fused time", "eager time", "fused / eager", "copy ×", "SDPA ×",
              "training step"]
    body = [[r["encoding"], r["kind"], str(r["T"]) if r["T"] else "–", r["dtype"] or "–", r["fused_impl"] or "–",
             fmt_seconds(r["fused_s"]), fmt_seconds(r["eager_s"]), fmt_times(r["fused_over_eager"]), fmt_times(r["copy_ratio"]),
             fmt_times(r["ratio_to_sdpa"]), fmt_times(r["train_step_ratio_to_nope"])] for r in cost.to_dict("records")]
    parts.append(_html_table(header, body, ["l", "l", "r", "l", "l", "r", "r", "r", "r", "r", "r"], "cost"))
    parts.append("</section>")
    return parts


@dataclasses.dataclass(frozen=True)
class Figure:
    """One figure of the page: its PNG files (several for a group such as the position patterns;
    none when every one was left out) and its caption, the ``CAPTION`` of its plot module plus the
    sentence naming what was left out (`lenbench.report.plots._style.left_out_note`)."""

    paths: tuple[Path, ...]
    caption: str


#: The page shows each figure at this resolution; its files keep the print one (`plots._style.DPI`).
SCREEN_DPI = 100
#: What the figures section says of them, once.
SCREEN_NOTE = (f"The figures are shown at {SCREEN_DPI} dpi in 256 colours; each lies beside this page under "
               f"its own name at {DPI} dpi (PNG) and as SVG and PDF.")


def screen_png(path: Path) -> bytes:
    """A 300 dpi figure PNG as the page embeds it: scaled to `SCREEN_DPI` (Lanczos) and reduced to
    a 256-colour palette (fast octree, no dithering, so text stays clean). A catalog's print files
    (26 entries × 13 lengths per heatmap panel) sum to about 10 MB, 13 MB as ``data:`` URIs; at
    screen resolution the page is about 2 MB."""
    with Image.open(path) as im:
        scale = SCREEN_DPI / DPI
        small = im.convert("RGB").resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))),
                                         Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    small.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(
        buf, format="PNG", optimize=True)
    return buf.getvalue()


def _figure(title: str, figure: Figure) -> str:
    imgs = "".join(f'<img alt="{_esc(title)}" src="data:image/png;base64,'
                   f'{base64.b64encode(screen_png(path)).decode("ascii")}">'
                   for path in figure.paths if path.is_file())
    return (f'<figure>{imgs}<figcaption><strong>{_esc(title)}.</strong> {_esc(figure.caption)}</figcaption>'
            "</figure>")


def _md_emphasis(text: str) -> str:
    """Escaped `text` with markdown's *emphasis* as <em>."""
    return re.sub(r"\*(.+?)\*", r"<em>\1</em>", _esc(text))


def _provenance(df: pd.DataFrame, cost: pd.DataFrame | None) -> list[tuple[str, str]]:
    items = []
    if len(df):
        for col, label in (("suite", "suite"), ("lenbench_version", "lenbench"), ("git_sha", "commit"),
                           ("torch_version", "torch"), ("python_version", "python"), ("device", "device"),
                           ("dtype", "dtype"), ("threads", "threads"), ("data_fingerprint", "data fingerprint"),
                           ("cpu_model", "CPU"), ("cpu_capability", "CPU kernels"), ("numerics", "numerics"),
                           ("settings", "settings")):
            values = sorted({str(v) for v in df[col]} - {""}) if col in df.columns else []
            if values:
                items.append((label, ", ".join(values)))
        items.append(("seeds", ", ".join(str(s) for s in sorted(set(df["seed"])))))
        items.append(("cells", str(df["cell_id"].nunique())))
        stamps = sorted({str(v) for v in df["timestamp"]} - {""})
        if stamps:
            items.append(("computed", f"{stamps[0]} … {stamps[-1]}"))
    if cost is not None:
        names = sorted(set(cost["device_name"]) - {""})
        items.append(("kernel timings on", ", ".join(names) or "?"))
    return items


def render_page(board: Leaderboard | None, df: pd.DataFrame, cost: pd.DataFrame | None,
                figures: dict[str, Figure]) -> str:
    """The self-contained ``index.html`` of a report (module docstring).

    Args:
        board: the leaderboard, or None for a kernel-only source.
        df: the tidy results frame (the provenance footer).
        cost: `lenbench.report.cost.cost_table`, or None.
        figures: title → `Figure`, in page order; each gets its caption under it.
    """
    sections: list[str] = []
    nav = []
    if board is not None:
        for (task, train_len), rows in board.per_task.groupby(["task", "train_len"], sort=False):
            nav.append((f"{task}-{int(train_len)}", f"{task} ({int(train_len)})"))
            sections += _task_section(board, task, int(train_len), rows)
        sections += ['<section id="overall"><h2>Overall ranking</h2>',
                     f'<p class="note">{_esc(OVERALL_NOTE)}</p>',
                     _html_table(OVERALL_HEADER, overall_lines(board), ["r", "l", "r", "r", "r", "r", "r"], "overall", key=1),
                     "</section>"]
        nav.append(("overall", "overall"))
    if figures:
        sections.append(f'<section id="figures"><h2>Figures</h2><p>{_esc(SCREEN_NOTE)}</p>')
        sections += [_figure(title, figure) for title, figure in figures.items()]
        sections.append("</section>")
        nav.append(("figures", "figures"))
    if cost is not None:
        sections += _cost_section(cost)
        nav.append(("cost", "cost"))
    footer = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in _provenance(df, cost))
    lede = ("How far past its training length does each positional encoding hold up, and what does it cost? "
            "Every score is the mean over seeds ± the half-width of its 95 % t interval over the seeds; "
            "rank = 1 + the number of entries better with statistical support (the paired test, Holm-corrected over "
            f"the table); {_md_emphasis(RANK_MARKS)} "
            f"{_md_emphasis(EFFECTIVE_LENGTH)} Click a column header to sort, type above a task's tables to filter them.")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>lenbench leaderboard</title>", f"<style>{_CSS}</style></head><body>",
        "<header><h1>lenbench leaderboard</h1>", f'<p class="lede">{lede}</p>',
        "<nav>" + "".join(f'<a href="#{_esc(a)}">{_esc(t)}</a>' for a, t in nav) + "</nav></header>",
        "<main>", *sections, "</main>",
        f'<footer><h2>Provenance</h2><dl>{footer}</dl></footer>', f"<script>{_JS}</script>", "</body></html>", ""])
