"""The cost view and the self-contained leaderboard page (index.html), parsed with html.parser."""

import base64
import html
import io
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from test_results import bench_json, tiny_rows

from lenbench.report.build import write_report
from lenbench.report.cost import cost_table, quality_cost_frame
from lenbench.report.timings import load_kernel_timings, load_training_steps

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def kern(encoding, kind, impl, T, median, dtype="fp32", copy_ratio=3.0) -> dict:
    name = f"test_kernel[{encoding}-{impl}-T{T}-{dtype}]"
    return {"group": f"{kind}-T{T}-{dtype}", "name": name, "fullname": f"bench/test_kernels.py::{name}",
            "extra_info": {"encoding": encoding, "kind": kind, "impl": impl, "T": T, "dtype": dtype, "bytes": 1024,
                           "copy_ratio": copy_ratio, "copy_seconds": median / copy_ratio},
            "stats": {"median": median, "mean": median, "min": median, "max": median, "stddev": 0.0, "rounds": 5}}


def step(encoding, ratio) -> dict:
    return {"group": "training-step-quick-lm", "name": f"test_training_step[{encoding}]",
            "fullname": f"bench/test_kernels.py::test_training_step[{encoding}]",
            "extra_info": {"encoding": encoding, "kind": "training-step", "seconds": 0.02 * ratio, "ratio_to_nope": ratio,
                           "geometry": {"task": "lm", "T": 64, "batch_size": 32}},
            "stats": {"median": 0.02 * ratio, "mean": 0.02 * ratio, "min": 0.02 * ratio, "max": 0.02, "rounds": 5}}


KERNELS = [
    kern("attention-baseline", "attention-baseline", "sdpa_causal", 256, 1e-3),
    kern("attention-baseline", "attention-baseline", "sdpa_causal", 512, 4e-3),
    kern("rope", "rotary", "eager", 256, 4e-4), kern("rope", "rotary", "hf", 256, 1e-4),  # hf: a reference, not fused
    kern("rope", "rotary", "fused", 256, 2e-4), kern("rope", "rotary", "eager", 512, 8e-4),
    kern("rope", "rotary", "fused", 512, 3e-4),
    kern("alibi", "bias", "eager", 256, 2e-3), kern("alibi", "bias", "cached", 256, 1.5e-3),
    kern("alibi", "bias", "flex", 256, 1.2e-3), kern("alibi", "bias", "eager", 512, 8e-3),
    kern("alibi", "bias", "cached", 512, 5e-3), kern("alibi", "bias", "flex", 512, 6e-3),
    step("nope", 1.0), step("rope", 1.1), step("alibi", 1.02), step("learned", 1.05),
]


def test_cost_table_closed_forms(tmp_path):
    path = bench_json(tmp_path / "b.json", [], KERNELS)
    cost = cost_table(load_kernel_timings(path), load_training_steps(path)).set_index(["encoding", "T"])
    rope = cost.loc[("rope", 256)]
    assert (rope["fused_impl"], rope["fused_s"], rope["eager_s"]) == ("fused", 2e-4, 4e-4)  # hf never counts as fused
    assert rope["fused_over_eager"] == pytest.approx(0.5) and rope["ratio_to_sdpa"] == pytest.approx(0.2)
    assert rope["train_step_ratio_to_nope"] == 1.1 and rope["copy_ratio"] == 3.0
    assert cost.loc[("alibi", 256), "fused_impl"] == "flex" and cost.loc[("alibi", 512), "fused_impl"] == "cached"
    assert cost.loc[("alibi", 512), "ratio_to_sdpa"] == pytest.approx(5e-3 / 4e-3)
    nope = cost.loc[("nope", 0)]  # no kernel of its own: a row with its training step only
    assert nope["train_step_ratio_to_nope"] == 1.0 and math.isnan(nope["fused_s"])


def test_pareto_front():
    per_task = pd.DataFrame([
        {"task": "t", "train_len": 8, "encoding": e, "kind": "model", "retention": r, "retention_ci_low": r - 0.1,
         "retention_ci_high": r + 0.1, "not_learned": nl}
        for e, r, nl in (("nope", 0.5, False), ("rope", 0.4, False), ("alibi", 0.9, False), ("learned", 0.99, True))])
    board = type("B", (), {"per_task": per_task})()
    cost = pd.DataFrame({"encoding": ["nope", "rope", "alibi", "learned"], "train_step_ratio_to_nope": [1.0, 1.1, 1.02, 0.9]})
    front = quality_cost_frame(board, cost).set_index("encoding")["pareto"].to_dict()
    # rope: dearer and worse than nope; learned: not learned, never on the front
    assert front == {"nope": True, "rope": False, "alibi": True, "learned": False}


class Page(HTMLParser):
    """Rows of every table (cell texts), every attribute value, the img sources and all text."""

    def __init__(self):
        super().__init__()
        self.rows, self.attrs, self.imgs, self.tags = [], [], [], []
        self._row = self._cell = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [v or "" for _, v in attrs]
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])
        if tag == "tr":
            self._row = []
        if tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        if tag == "tr":
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def markdown_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip()[1:-1].split(" | ")] for line in text.splitlines()
            if line.startswith("|") and not re.fullmatch(r"[|\s:-]+", line)]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    source = bench_json(out / "bench.json", tiny_rows(seeds=(0, 1)), KERNELS)
    write_report(source, out)
    return out


def test_index_html_holds_every_leaderboard_cell_and_no_external_url(report):
    text = (report / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"https?:", text), "index.html must not reference anything on the network"
    page = Page()
    page.feed(text)
    assert "link" not in page.tags and all(not a.startswith("//") for a in page.attrs)
    rows = {tuple(r) for r in page.rows}
    md = markdown_rows((report / "leaderboard.md").read_text())
    assert len(md) > 20
    for row in md:  # every table row of leaderboard.md, header and numbers, cell for cell
        assert tuple(row) in rows, f"leaderboard.md row {row} missing from index.html"
    cost = pd.read_csv(report / "cost.csv")
    kinds = set(zip(cost["encoding"], cost["kind"], strict=True))
    cost_rows = [r for r in page.rows if len(r) == 11 and tuple(r[:2]) in kinds]
    assert len(cost_rows) == len(cost)
    for html_row, r in zip(cost_rows, cost.to_dict("records"), strict=True):
        assert html_row[0] == r["encoding"] and html_row[2] == (str(r["T"]) if r["T"] else "–")
        assert html_row[10] == f"{r['train_step_ratio_to_nope']:.2f}×"
        if not math.isnan(r["fused_s"]):
            assert html_row[5] == f"{r['fused_s'] * 1e6:.3g} µs" or html_row[5] == f"{r['fused_s'] * 1e3:.3g} ms"
    assert any(r[1] == "n/l" or "(not learned)" in r[1] for r in page.rows)  # not-learned marks shown
    for src in page.imgs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG_MAGIC
    assert len(page.imgs) >= 4  # extrapolation, heatmap, cost, quality vs cost (+ encoding patterns)
    assert "Provenance" in text and "test cpu" in text


def test_cost_files_and_quality_cost_plot(report):
    for name in ("cost.png", "quality_cost.png"):
        assert (report / name).read_bytes()[:8] == PNG_MAGIC
    assert all((report / f"{stem}.{fmt}").is_file() for stem in ("cost", "quality_cost") for fmt in ("svg", "pdf"))


def test_kernel_only_benchmark_json_gives_the_cost_view(tmp_path):
    source = bench_json(tmp_path / "k.json", [], KERNELS)
    written = [p.name for p in write_report(source, tmp_path / "out")]
    assert written == ["cost.csv", "cost.md", "cost.png", "cost.svg", "cost.pdf", "index.html"]
    assert json.loads(source.read_text())  # the source is untouched


class Captions(HTMLParser):
    """Every <figure>: its number of <img> and its caption's text."""

    def __init__(self):
        super().__init__()
        self.figures: list[dict] = []
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        if tag == "figure":
            self.figures.append({"imgs": 0, "caption": ""})
        elif tag == "img" and self.figures:
            self.figures[-1]["imgs"] += 1
        elif tag == "figcaption":
            self._in_caption = True

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self._in_caption = False

    def handle_data(self, data):
        if self._in_caption:
            self.figures[-1]["caption"] += data


def test_every_figure_has_its_caption_once_and_says_what_it_left_out(report):
    from lenbench.report.plots import cost, extrapolation, geometry, heatmap
    from lenbench.report.plots._style import NOT_LEARNED

    page = Captions()
    page.feed((report / "index.html").read_text(encoding="utf-8"))
    captions = [f["caption"] for f in page.figures]
    expected = {"metric against evaluation length": extrapolation.CAPTION, "leaderboard heatmap": heatmap.CAPTION,
                "position patterns": geometry.CAPTION, "kernel time against sequence length": cost.COST_CAPTION,
                "quality against training cost": cost.QUALITY_COST_CAPTION}
    assert len(captions) == len(expected)
    for (title, caption), text in zip(expected.items(), captions, strict=True):
        assert text.startswith(f"{title}. {caption}"), (title, text)
    assert all(f["imgs"] >= 1 for f in page.figures)
    # tiny_rows: copy is learned by rope and alibi, lm by all: no board is left out
    assert not any("Left out" in c for c in captions[:2]) and NOT_LEARNED not in "".join(captions)
    # no run directory: learned has no checkpoint (only its initialisation) and nope has no pattern
    assert captions[2].endswith(f" Left out: learned: {geometry.AT_INITIALISATION}; nope: {geometry.NO_PATTERN}.")
    assert page.figures[2]["imgs"] == 2  # rope and alibi
    assert not (report / "encodings" / "learned.png").exists() and (report / "encodings" / "rope.png").is_file()


def test_effective_length_is_defined_on_the_page_and_na_for_an_entry_at_zero(tmp_path):
    from test_results import row

    from lenbench.report.markdown import EFFECTIVE_LENGTH, board_header, board_table_rows
    from lenbench.report.tables import leaderboard

    rows = [row("copy", e, "none", 10, r, "exact_match", v, s) for s in (0, 1)
            for e, vals in (("rope", (1.0, 0.95, 0.5)), ("nope", (0.0, 0.0, 0.0)), ("alibi", (0.0, 0.2, 0.1)))
            for r, v in zip((1, 2, 4), vals, strict=True)]
    board = leaderboard(pd.DataFrame(rows))
    table = board.per_task.set_index("encoding")
    header = board_header("exact_match", True)
    cells = {r[1].split(" ")[0]: r[header.index("effective length ↑")]
             for r in board_table_rows(board.per_task, "rank", "exact_match")}
    assert cells["rope"] == "2×"  # discrete: never with an interval
    assert cells["nope"] == "n/a" and table.loc["nope", "effective_length"] == 4  # 0 within 10 % of 0, vacuously
    assert cells["alibi"] == "n/a"  # in-dist 0: nothing to hold, whatever follows
    write_report(pd.DataFrame(rows), tmp_path, plots=False)
    text = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert html.escape(EFFECTIVE_LENGTH.split("*effective length*", 1)[1], quote=True) in text
    assert "<em>effective length</em>" in text
    assert "<td class=\"r\" data-v=\"NaN\">n/a</td>" in text  # sorts with the missing values
    assert EFFECTIVE_LENGTH in (tmp_path / "leaderboard.md").read_text()


def test_the_page_embeds_each_figure_at_screen_resolution_and_leaves_the_print_files_whole(report):
    """Every embedded image is its figure file scaled from 300 to 100 dpi in a 256-colour palette;
    the files beside the page stay at 300 dpi (full RGB)."""
    from PIL import Image

    from lenbench.report.page import SCREEN_NOTE

    page = Page()
    page.feed((report / "index.html").read_text(encoding="utf-8"))
    files = sorted(report.glob("*.png")) + sorted(report.glob("encodings/*.png"))
    widths = {}
    for path in files:
        with Image.open(path) as im:
            assert im.mode == "RGBA" and im.info["dpi"][0] == pytest.approx(300, abs=1)
            widths[path.name] = (round(im.width / 3), round(im.height / 3))
    embedded = []
    for src in page.imgs:
        with Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))) as im:
            assert im.mode == "P"
            embedded.append(im.size)
    assert len(embedded) >= 4 and set(embedded) <= set(widths.values())
    assert SCREEN_NOTE in html.unescape((report / "index.html").read_text(encoding="utf-8"))


def test_the_pages_by_ratio_table_labels_entries_as_leaderboard_md_does(tmp_path):
    """An uncertain entry (the interval of its in-dist score straddles the threshold) is "(uncertain)" in
    the page's by-ratio table as in leaderboard.md's, not "(not learned)"; every by-ratio row of
    leaderboard.md is on the page, cell for cell."""
    from test_results import row

    rows = [row("sort", enc, "none", 10, ratio, "exact_match", value, seed)
            for seed in (0, 1, 2) for enc, at_1x in (("rope", (1.0, 1.0, 1.0)), ("alibi", (1.0, 0.3, 0.9)),
                                                     ("nope", (0.0, 0.05, 0.0)))
            for ratio, value in ((1, at_1x[seed]), (2, at_1x[seed] / 2))]
    write_report(bench_json(tmp_path / "bench.json", rows), tmp_path)
    page = Page()
    page.feed((tmp_path / "index.html").read_text(encoding="utf-8"))
    by_ratio = [r for r in markdown_rows((tmp_path / "leaderboard.md").read_text()) if r[0] == "encoding"
                and r[1:] == ["1x", "2x"]]
    assert by_ratio, "leaderboard.md has a by-ratio table"
    md = markdown_rows((tmp_path / "leaderboard.md").read_text())
    start = md.index(by_ratio[0])
    table = md[start:start + 4]
    assert sorted(r[0] for r in table[1:]) == ["alibi (uncertain)", "nope (not learned)", "rope"], table
    for r in table:
        assert r in page.rows, f"leaderboard.md's by-ratio row {r} is not on the page"


def test_a_length_where_every_entry_failed_stays_a_column_marked_fail(tmp_path):
    """The board's own ratios (`Leaderboard.ratio_columns`) are the columns of summary.md and of
    leaderboard.md's by-ratio table: a length at which every entry failed shows "fail" there, it does not
    drop out."""
    from test_results import row

    from lenbench.report.markdown import leaderboard_markdown, summary_markdown
    from lenbench.report.rows import load_results
    from lenbench.report.tables import leaderboard

    rows = [row("sort", enc, "none", 10, ratio, "exact_match", None if ratio == 4 else value, seed)
            for seed in (0, 1, 2) for enc, value in (("rope", 1.0), ("alibi", 0.95))
            for ratio in (1, 2, 4)]
    board = leaderboard(load_results(rows))
    assert board.ratio_columns("sort", 10) == ["1x", "2x", "4x"]
    summary = markdown_rows(summary_markdown(board).split("**overall**")[0])  # the sort board's table
    assert [c.split()[-1] for c in summary[0][2:5]] == ["1×", "2×", "4×"]
    assert [(r[1], r[4]) for r in summary[1:]] == [("rope", "fail"), ("alibi", "fail")]
    by_ratio = markdown_rows(leaderboard_markdown(board))
    start = by_ratio.index(["encoding", "1x", "2x", "4x"])
    assert [r[3] for r in by_ratio[start + 1:start + 3]] == ["fail", "fail"]
