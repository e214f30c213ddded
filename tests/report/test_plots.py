"""Figures render from a tiny results set, in PNG and SVG, with one fixed style per line."""

import itertools
import math
import random
import zlib
from pathlib import Path

import pytest
from matplotlib.colors import to_rgb

from lenbench.encodings import ENCODINGS
from lenbench.report.geometry import encoding_pattern, has_fixed_pattern
from lenbench.report.plots._style import encoding_color, series_style, variant_dashes
from lenbench.report.plots.extrapolation import extrapolation_plot, task_chance
from lenbench.report.plots.geometry import encoding_heatmap
from lenbench.report.plots.heatmap import leaderboard_heatmap
from lenbench.report.plots.needle import needle_heatmap
from lenbench.report.plots.position import position_loss_plot
from lenbench.report.rows import load_results, series_label, series_order

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def row(task, encoding, variant, ratio, metric, value, seed=0, train_len=8):
    return {"schema_version": 1, "cell_id": f"{task}-{encoding}-{seed}", "suite": "tiny", "task": task,
            "encoding": encoding, "variant": variant, "train_len": train_len, "eval_len": int(ratio * train_len),
            "ratio": float(ratio), "metric": metric, "value": value, "n_samples": 4, "seed": seed,
            "higher_is_better": metric == "token_accuracy", "status": "failed" if value is None else "ok",
            "error": "", "lenbench_version": "0.1.0", "git_sha": "x", "torch_version": "2.13.0", "device": "cpu",
            "dtype": "float32", "timestamp": "t", "train_seconds": 1.0}


def draw(encoding, path, **kwargs):
    """The position pattern of an encoding (`lenbench.report.geometry`), drawn (`lenbench.report.plots.geometry`)."""
    pattern = encoding_pattern(encoding, **kwargs)
    return encoding_heatmap(pattern.matrix, path, title=pattern.title, note=pattern.note)


def tiny():
    rows = []
    for seed in (0, 1):
        for i, (enc, var) in enumerate([("rope", "none"), ("rope", "yarn"), ("alibi", "none"), ("learned", "none"),
                                        ("my-label", "none")]):
            for ratio in (1, 2, 4):
                failed = enc == "learned" and ratio > 2
                rows.append(row("copy", enc, var, ratio, "token_accuracy",
                                None if failed else 0.97 / ratio ** (0.2 * (i + 1)) + 0.01 * seed, seed))
                rows.append(row("lm", enc, var, ratio, "perplexity",
                                None if failed else 5.0 * ratio ** (0.3 * (i + 1)) + seed, seed, train_len=16))
            rows.append(row("mystery", enc, var, 1, "token_accuracy", 0.5, seed))  # a task the registry lacks
    return load_results(rows)


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_extrapolation_plot_renders(tmp_path, suffix):
    path = extrapolation_plot(tiny(), tmp_path / f"x.{suffix}")
    data = path.read_bytes()
    if suffix == "png":
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    else:
        text = data.decode()
        assert "<svg" in text and "</svg>" in text
        for label in ("rope+yarn", "alibi", "learned", "my-label", "training length", "chance"):
            assert f"<!-- {label} -->" in text  # text drawn as glyph paths keeps the string as a comment
        assert "<dc:date>" not in text


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_leaderboard_heatmap_renders(tmp_path, suffix):
    path = leaderboard_heatmap(load_results(tiny()), tmp_path / f"h.{suffix}")
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) if suffix == "png" else b"<svg" in data


def test_encoding_heatmap_still_works(tmp_path):
    png = draw("sinusoidal", tmp_path / "s.png", length=64, d_model=32, n_heads=4)
    svg = draw("alibi", tmp_path / "a.svg", length=64, d_model=32, n_heads=4)
    assert png.read_bytes().startswith(PNG_MAGIC) and b"<svg" in svg.read_bytes()
    # a trainable encoding draws its (seeded) initialisation identically every time
    a = draw("learned", tmp_path / "l1.svg", length=32, d_model=16, n_heads=2).read_bytes()
    b = draw("learned", tmp_path / "l2.svg", length=32, d_model=16, n_heads=2).read_bytes()
    assert a == b
    assert has_fixed_pattern("sinusoidal") and has_fixed_pattern("rope")
    assert not has_fixed_pattern("learned") and not has_fixed_pattern("nope")


@pytest.mark.slow
def test_svg_is_reproducible(tmp_path):
    a = extrapolation_plot(tiny(), tmp_path / "a.svg").read_bytes()
    b = extrapolation_plot(tiny(), tmp_path / "b.svg").read_bytes()
    assert a == b


def test_fixed_palette_and_order():
    names = ENCODINGS.names()
    # the declared colour, never one from what else is in the figure; never grey (the baselines' shade)
    assert encoding_color("rope") == to_rgb("#00458a")
    # variants: a colour each (not the family's grey told apart by dashes alone), the same hue for the
    # same rope_type in every family
    rope_family = [series_style("rope", v)["color"] for v in ("none", "linear", "ntk", "yarn", "dynamic", "llama3")]
    assert len(set(rope_family)) == len(rope_family)
    assert min(max(abs(a - b) for a, b in zip(x, y, strict=True)) for i, x in enumerate(rope_family) for y in rope_family[i + 1:]) > 0.1
    assert series_style("rope", "none")["color"] == encoding_color("rope")
    assert series_style("rope", "finetune-linear-x4")["color"] != series_style("rope", "linear")["color"]
    assert variant_dashes("none") == "" and variant_dashes("yarn") != variant_dashes("linear")
    assert variant_dashes("finetune-linear-x4") == variant_dashes("linear")
    # a label outside the registry: a stable colour no registered encoding uses
    assert encoding_color("my-label") == encoding_color("my-label")
    assert encoding_color("my-label") not in [encoding_color(n) for n in names]
    # one canonical order: declared order of encodings, then "none" before the rope types in registry order
    pairs = [("rope", "yarn"), ("my-label", "none"), ("alibi", "none"), ("rope", "none"), ("rope", "linear")]
    assert series_order(pairs) == [("alibi", "none"), ("rope", "none"), ("rope", "linear"), ("rope", "yarn"),
                                   ("my-label", "none")]
    assert series_order(reversed(pairs)) == series_order(pairs)


def test_chance_levels():
    assert task_chance("copy") == pytest.approx(1 / 8)
    assert task_chance("parity") == 0.5
    assert task_chance("lm") is None
    assert task_chance("no-such-task") is None


def test_plot_with_a_single_point_and_only_failures(tmp_path):
    rows = [row("copy", "rope", "none", 1, "token_accuracy", 0.7),
            row("copy", "learned", "none", 1, "token_accuracy", None)]
    assert extrapolation_plot(load_results(rows), tmp_path / "one.png").read_bytes().startswith(PNG_MAGIC)
    assert leaderboard_heatmap(load_results(rows), tmp_path / "one_h.png").read_bytes().startswith(PNG_MAGIC)
    assert math.isnan(load_results(rows).set_index("encoding").loc["learned", "value"])


@pytest.mark.slow
def test_encoding_heatmaps_for_every_encoding_with_the_runs_geometry(tmp_path):
    import json

    from lenbench.report.geometry import encoding_geometries, encoding_patterns
    from lenbench.report.plots.geometry import safe_encoding_heatmap

    rows = [row("copy", e, "none", r, "exact_match", 1.0) for e in ("nope", "rope", "alibi", "learned", "t5", "fire")
            for r in (1, 2)]
    df = load_results(rows)
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "a.json").write_text(json.dumps({
        "status": "ok", "title": "copy-rope-L8-s0", "train_id": "none",
        "config": {"encoding": "rope", "task": "copy", "model": {"d_model": 32, "n_heads": 2},
                   "encoding_params": {"theta": 500.0}}}))
    geo = encoding_geometries(df, tmp_path)
    assert set(geo) == {"nope", "rope", "alibi", "learned", "t5", "fire"}  # every registered encoding, not 3 of them
    assert (geo["rope"]["d_model"], geo["rope"]["n_heads"], geo["rope"]["theta"]) == (32, 2, 500.0)
    assert geo["rope"]["length"] == 16 and "geometry of the run" in geo["rope"]["note"]
    assert geo["learned"]["note"].endswith("at initialisation (no checkpoint)")
    # a fixed encoding is never said to have trained weights: its pattern is its definition
    assert geo["rope"]["note"].endswith("fixed (nothing trained)") and "trained weights" not in geo["rope"]["note"]
    patterns = encoding_patterns(df, tmp_path)
    assert set(patterns) == set(geo)  # every one of them can be drawn
    assert (patterns["rope"].d_model, patterns["rope"].n_heads, len(patterns["rope"].matrix)) == (32, 2, 16)
    for encoding, pattern in patterns.items():
        assert pattern.note == geo[encoding]["note"]
        assert safe_encoding_heatmap(pattern.matrix, tmp_path / f"{encoding}.png", title=pattern.title,
                                     note=pattern.note) is not None, encoding


def test_rotary_heatmap_reads_cos_of_position_times_frequency():
    import torch

    from lenbench.encodings import EncodingDims, build_encoding
    from lenbench.report.geometry import encoding_matrix

    for layout in ("half", "interleaved"):
        enc = build_encoding("rope", EncodingDims(d_model=32, n_heads=2, max_len=64), theta=100.0, layout=layout)
        matrix, xlabel, ylabel = encoding_matrix(enc, 64)
        theta = 100.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)  # (Dh/2,)
        expected = torch.cos(torch.arange(64, dtype=torch.float64)[:, None] * theta[None])  # (T, Dh/2)
        assert matrix.shape == (64, 8) and ylabel == "position m"
        torch.testing.assert_close(matrix.double(), expected, atol=1e-5, rtol=0)


# --- layout: constrained, nothing overlapping ----------------------------------------------------


@pytest.fixture
def capture(monkeypatch):
    """Figures as saved: `capture(module)` makes that plot module hand each figure to the list it
    returns (drawn, before it is closed)."""
    import importlib

    def install(name: str) -> list:
        module = importlib.import_module(f"lenbench.report.plots.{name}")
        figures, save = [], module.save_figure

        def keep(fig, path, **kwargs):
            fig.canvas.draw()
            fig.test_renderer = fig.canvas.get_renderer()  # closing the figure takes its Agg canvas
            fig.test_texts = text_boxes(fig)  # as drawn: saving lays the figure out again at its own dpi
            figures.append(fig)
            return save(fig, path, **kwargs)

        monkeypatch.setattr(module, "save_figure", keep)
        return figures

    return install


def visible_axes(fig):
    return [ax for ax in fig.get_axes() if ax.get_visible()]


def legends(fig):
    found = list(fig.legends)
    for sub in fig.subfigs:
        found += legends(sub)
    return found + [ax.get_legend() for ax in fig.get_axes() if ax.get_legend() is not None]


def assert_nothing_overlaps(fig):
    """No legend over any panel; no two panels' decorations (titles, labels, tick labels) touching;
    the title above every panel."""
    renderer = fig.test_renderer
    axes = visible_axes(fig)
    boxes = [ax.get_tightbbox(renderer) for ax in axes]  # the panel with its title, labels and tick labels
    titles = [t for f in (fig, *fig.subfigs) for t in [getattr(f, "_suptitle", None)] if t is not None and t.get_text()]
    for legend in (lg for lg in legends(fig) if lg.axes is None):  # a legend inside its own axes may sit on it
        box = legend.get_window_extent(renderer)
        for ax, tight in zip(axes, boxes, strict=True):
            assert not box.overlaps(tight), f"legend over the panel {ax.get_title()!r} or its labels"
        for title in titles:
            assert not box.overlaps(title.get_window_extent(renderer)), f"legend over the title {title.get_text()!r}"
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            assert not a.overlaps(boxes[j]), f"panels {axes[i].get_title()!r} and {axes[j].get_title()!r} overlap"
    for title in titles:
        box = title.get_window_extent(renderer)
        for ax, tight in zip(axes, boxes, strict=True):
            assert not box.overlaps(tight), f"title {title.get_text()!r} over the panel {ax.get_title()!r}"


def published_like():
    """Results shaped like the published board: a task no model learned (copy), one learned
    (passkey) with depth buckets, lm with position buckets and the unigram baseline, rope variants."""
    rows = []
    pairs = [("alibi", "none"), ("rope", "none"), ("rope", "linear"), ("rope", "finetune-linear-x4"), ("rope", "yarn"),
             ("rope", "finetune-yarn-x4"), ("rope", "yarn@4"), ("learned", "none"), ("my-plugin", "none")]
    for seed in (0, 1):
        for i, (enc, var) in enumerate(pairs):
            for ratio in (1, 2, 4):
                rows.append(row("copy", enc, var, ratio, "exact_match", 0.0 if i % 2 else 0.2 / ratio, seed))
                at_1x = 0.5 if (enc, var) in (("learned", "none"), ("rope", "yarn@4"), ("rope", "finetune-linear-x4")) \
                    else 0.97  # 0.5: not learned
                acc = min(1.0, at_1x / ratio ** (0.3 * (i + 1)) + 0.01 * seed)
                rows.append(row("passkey", enc, var, ratio, "exact_match", acc, seed, train_len=16))
                for lo in (0.0, 0.5):
                    rows.append({**row("passkey", enc, var, ratio, "exact_match", acc * (1 - lo / 2), seed, train_len=16),
                                 "bucket": f"depth:{lo:.2f}-{lo + 0.5:.2f}"})
                rows.append(row("lm", enc, var, ratio, "perplexity", 6.0 * ratio ** (0.25 * (i + 1)) + seed, seed,
                                train_len=16))
                for p in range(0, int(16 * ratio), 8):
                    rows.append({**row("lm", enc, var, ratio, "nll", 1.5 + 0.1 * i + p / 100, seed, train_len=16),
                                 "bucket": f"pos:{p}-{p + 7}"})
        for ratio in (1, 2, 4):
            rows.append(row("lm", "baseline:unigram", "none", ratio, "perplexity", 40.0, seed, train_len=16))
    return load_results(rows)


@pytest.fixture(scope="module")
def published():
    from lenbench.report.tables import leaderboard

    df = published_like()
    return df, leaderboard(df)


PLOTS = {
    "extrapolation": lambda df, board, path: extrapolation_plot(df, path, board=board),
    "heatmap": lambda df, board, path: leaderboard_heatmap(df, path, board=board),
    "position": lambda df, board, path: position_loss_plot(df, path, board=board),
    "needle": lambda df, board, path: needle_heatmap(df, path, board=board),
}


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_figures_use_constrained_layout_and_nothing_overlaps(tmp_path, capture, published, name):
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    df, board = published
    figures = capture(name)
    PLOTS[name](df, board, tmp_path / f"{name}.png")
    (fig,) = figures
    assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
    assert_nothing_overlaps(fig)


def test_cost_figures_use_constrained_layout_and_legends_stay_outside(tmp_path, capture, published):
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from test_page import KERNELS, step
    from test_results import bench_json

    from lenbench.report.cost import cost_table, quality_cost_frame
    from lenbench.report.plots.cost import cost_plot as draw_cost
    from lenbench.report.plots.cost import quality_cost_plot
    from lenbench.report.timings import load_kernel_timings, load_training_steps

    _, board = published
    path = bench_json(tmp_path / "b.json", [], [*KERNELS, step("my-plugin", 1.2)])
    cost = cost_table(load_kernel_timings(path), load_training_steps(path))
    figures = capture("cost")
    draw_cost(cost, tmp_path / "c.png")
    quality_cost_plot(quality_cost_frame(board, cost), tmp_path / "q.png")
    for fig in figures:
        assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
        assert_nothing_overlaps(fig)
    quality = figures[1]
    assert not any(ax.texts for ax in visible_axes(quality)), "points are named in the legend, not by labels that overlap"
    labels = [t.get_text() for t in legends(quality)[0].get_texts()]
    assert labels[:4] == ["alibi", "learned", "rope", "my-plugin"] and "Pareto front" in labels  # registry order


def test_log_colour_bar_has_three_or_more_ticks(tmp_path, capture, published):
    from matplotlib.colors import LogNorm

    from lenbench.report.plots._style import log_ticks

    df, board = published
    figures = capture("heatmap")
    leaderboard_heatmap(df, tmp_path / "h.png", board=board)
    logs = [ax.collections[0] for ax in visible_axes(figures[0]) if ax.collections
            and isinstance(ax.collections[0].norm, LogNorm)]
    assert len(logs) == 1  # lm's perplexity
    norm = logs[0].norm
    ticks = [t for t in logs[0].colorbar.get_ticks() if norm.vmin <= t <= norm.vmax]
    assert len(ticks) >= 3, ticks
    # closed forms, and three or more ticks over any range
    assert log_ticks(6.2, 31.9) == [10, 20, 30]
    assert log_ticks(1, 1000) == [1, 10, 100, 1000]
    assert log_ticks(5, 12) == [5, 7, 10]
    assert log_ticks(4.7, 42) == [5, 10, 20, 42]  # the staged catalog's lm: its top third labelled at its end
    assert log_ticks(4.7, 42, ends=False) == [5, 10, 20]  # a panel's axis: round values only
    rng = random.Random(0)
    for _ in range(200):
        lo = 10 ** rng.uniform(-3, 4)
        hi = lo * 10 ** rng.uniform(0.01, 3)
        ticks = log_ticks(lo, hi)
        assert len(ticks) >= 3 and all(lo <= t <= hi for t in ticks), (lo, hi, ticks)



@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_a_log_metric_axis_inside_one_decade_is_labelled(tmp_path, capture, scale):
    """Perplexities of 150-240 (or 5-8) lie inside one decade, where matplotlib's log locator puts
    no labelled tick: the panel's y axis carries three or more labelled round values in its view."""
    figures = capture("extrapolation")
    rows = [row("lm", enc, "none", ratio, "perplexity", scale * (5.0 + i * 0.5 + ratio * 0.2 + 0.1 * seed), seed,
                train_len=16) for seed in (0, 1) for i, enc in enumerate(("rope", "alibi", "nope")) for ratio in (1, 2, 4)]
    extrapolation_plot(load_results(rows), tmp_path / "x.png")
    (ax,) = [ax for ax in visible_axes(figures[0]) if ax.get_yscale() == "log"]
    lo, hi = ax.get_ylim()
    assert math.floor(math.log10(lo)) == math.floor(math.log10(hi)), "the view spans one decade, as meant"
    labelled = [(t.get_position()[1], t.get_text()) for t in ax.get_yticklabels() if t.get_text()]
    inside = [(v, text) for v, text in labelled if lo <= v <= hi]
    assert len(inside) >= 3, labelled
    assert all(float(text) == pytest.approx(v) for v, text in inside), inside  # plain labels: 5, 6, 7, not 5×10⁰


def test_a_panels_narrow_log_range_gets_evenly_spaced_round_ticks():
    """A panel's axis (no ends) inside too narrow a range for the log mantissas gets round values at one
    step (31-48: 35, 40, 45; a colour bar keeps its ends: 31 ... 48); three or more, inside, over any range."""
    from lenbench.report.plots._style import log_ticks

    assert log_ticks(31, 48, ends=False) == [35, 40, 45]
    assert log_ticks(31, 39, ends=False) == [32, 34, 36, 38]
    assert log_ticks(31, 48)[0] == 31 and log_ticks(31, 48)[-1] == 48
    assert log_ticks(5, 12, ends=False) == log_ticks(5, 12) == [5, 7, 10]  # the mantissas first, as before
    rng = random.Random(1)
    for _ in range(300):
        lo = 10 ** rng.uniform(-3, 4)
        hi = lo * 10 ** rng.uniform(0.0005, 3)
        ticks = log_ticks(lo, hi, ends=False)
        assert len(ticks) >= 3 and all(lo <= t <= hi for t in ticks), (lo, hi, ticks)
        steps = {round((b - a) / hi, 9) for a, b in itertools.pairwise(ticks)}
        assert len(steps) == 1 or ticks[1] / ticks[0] >= 1.1, (lo, hi, ticks)  # one step, or the log mantissas


def test_only_learned_entries_draw_an_interval_band(tmp_path, capture):
    """A learned entry's 95 % band is drawn; an uncertain or not-learned one is a faded line without one
    (its interval is in the tables), so 26 entries with bimodal seeds do not wash the panel over."""
    from matplotlib.collections import PolyCollection

    rows = [row("sort", enc, "none", ratio, "exact_match", value, seed)
            for seed in (0, 1, 2) for enc, at_1x in (("rope", (1.0, 0.98, 1.0)), ("alibi", (1.0, 0.3, 0.9)),
                                                     ("nope", (0.0, 0.05, 0.1)))
            for ratio, value in ((1, at_1x[seed]), (2, at_1x[seed] / 2))]
    df = load_results(rows)
    figures = capture("extrapolation")
    extrapolation_plot(df, tmp_path / "x.png")
    (ax,) = [ax for ax in visible_axes(figures[0]) if ax.get_title()]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1, bands
    assert bands[0].get_facecolor()[0][:3] == pytest.approx(to_rgb(series_style("rope", "none")["color"]))
    faded = [line for line in ax.get_lines() if line.get_alpha() is not None and line.get_alpha() < 1]
    assert len(faded) == 2  # alibi (uncertain) and nope (not learned): their lines stay


def test_heatmap_rows_carry_the_boards_own_verdicts(tmp_path, capture):
    """An unranked row is labelled as leaderboard.md labels it: "(uncertain)" where the interval of its
    in-dist score straddles the threshold, "(not learned)" where it lies below; a learned row bare."""
    from lenbench.report.markdown import leaderboard_markdown
    from lenbench.report.tables import leaderboard

    rows = [row("sort", enc, "none", ratio, "exact_match", value, seed)
            for seed in (0, 1, 2) for enc, at_1x in (("rope", (1.0, 1.0, 1.0)), ("alibi", (1.0, 0.3, 0.9)),
                                                     ("nope", (0.0, 0.05, 0.0)))
            for ratio, value in ((1, at_1x[seed]), (2, at_1x[seed] / 2))]
    df = load_results(rows)
    board = leaderboard(df)
    verdicts = dict(zip(board.per_task["encoding"], board.per_task["learnability"], strict=True))
    assert verdicts == {"rope": "learned", "alibi": "uncertain", "nope": "not learned"}, verdicts
    figures = capture("heatmap")
    leaderboard_heatmap(df, tmp_path / "h.png", board=board)
    (ax,) = [ax for ax in visible_axes(figures[0]) if ax.get_title()]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["alibi (uncertain)", "nope (not learned)", "rope"]
    md = leaderboard_markdown(board)
    assert all(f"| {label} " in md for label in labels)  # the tables' own labels


def test_heatmap_panel_matches_seaborns_annotated_heatmap():
    """A panel is drawn by matplotlib directly; against `seaborn.heatmap` with the same texts (the
    reference it replaces): the same cell colours, masked NaN cells, and each text at the same place
    in the same colour (dark on bright cells, white on dark ones)."""
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    import seaborn as sns
    from matplotlib.colors import LogNorm, Normalize

    from lenbench.report.plots.heatmap import _panel

    rng = np.random.default_rng(0)
    for norm in (Normalize(0.0, 1.0), LogNorm(2.0, 50.0)):
        values = rng.uniform(norm.vmin, norm.vmax, size=(5, 4))
        values[1, 2] = np.nan
        matrix = pd.DataFrame(values, index=[f"e{i}" for i in range(5)], columns=["1×", "2×", "4×", "8×"])
        texts = [["" if np.isnan(v) else f"{v:.2f}" for v in row] for row in values]
        drawn = []
        for ours in (True, False):
            fig, ax = plt.subplots()
            if ours:
                _panel(ax, matrix, cmap="viridis_r", norm=norm, label="m", texts=texts)
            else:
                sns.heatmap(matrix, ax=ax, cmap="viridis_r", norm=norm, annot=np.array(texts, dtype=object), fmt="",
                            annot_kws={"fontsize": 6.5}, linewidths=0.5, linecolor="white")
            mesh = ax.collections[0]
            mesh.update_scalarmappable()
            drawn.append((np.ma.getmaskarray(mesh.get_array()).ravel().tolist(), mesh.to_rgba(mesh.get_array()),
                          sorted((t.get_position(), t.get_text(), t.get_color()) for t in ax.texts if t.get_text()),
                          [t.get_text() for t in ax.get_yticklabels()], ax.get_ylim()))
            plt.close(fig)
        (mask, rgba, texts_ours, ylabels, ylim), (mask_ref, rgba_ref, texts_ref, ylabels_ref, ylim_ref) = drawn
        assert mask == mask_ref and sum(mask) == 1
        assert np.allclose(np.ma.filled(rgba, 0), np.ma.filled(rgba_ref, 0))
        assert texts_ours == texts_ref and len(texts_ours) == 19
        assert {c for _, _, c in texts_ours} == {".15", "w"}  # both text colours occur
        assert ylabels == ylabels_ref == list(matrix.index) and ylim == ylim_ref


def test_leaderboard_heatmap_draws_the_figure_once_per_save(tmp_path, monkeypatch):
    """Drawing a panel does not render the figure (seaborn's heatmap did, once per call: a 26-entry,
    8-task catalog drew its figure 8 times over before saving it once per format)."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from lenbench.report.plots._style import save_figure

    renders = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: (renders.append(1), draw(self, renderer))[1])
    save_figure(plt.subplots()[0], tmp_path / "plain.png")  # what saving itself renders (a tight bounding box: 2)
    saving, renders[:] = len(renders), []
    leaderboard_heatmap(tiny(), tmp_path / "h.png")  # two panels
    assert saving >= 1 and len(renders) == saving, (len(renders), saving)

# --- one colour per encoding, everywhere ---------------------------------------------------------


def legend_colours(fig) -> dict[str, tuple]:
    import matplotlib.colors as mcolors

    out = {}
    for legend in legends(fig):
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            out[text.get_text()] = mcolors.to_rgb(handle.get_color())
    return out


def line_colours(fig) -> set[tuple]:
    import matplotlib.colors as mcolors

    return {mcolors.to_rgb(line.get_color()) for ax in visible_axes(fig) for line in ax.get_lines()}


@pytest.mark.slow
def test_an_encoding_has_one_colour_in_every_figure(tmp_path, capture, published):
    from test_page import KERNELS, step
    from test_results import bench_json

    from lenbench.report.cost import cost_table, quality_cost_frame
    from lenbench.report.plots.cost import cost_plot as draw_cost
    from lenbench.report.plots.cost import quality_cost_plot
    from lenbench.report.timings import load_kernel_timings, load_training_steps

    df, board = published
    path = bench_json(tmp_path / "b.json", [], [*KERNELS, step("my-plugin", 1.2)])
    cost = cost_table(load_kernel_timings(path), load_training_steps(path))
    figures = {name: capture(name) for name in ("extrapolation", "position", "cost")}
    PLOTS["extrapolation"](df, board, tmp_path / "x.png")
    PLOTS["position"](df, board, tmp_path / "p.png")
    draw_cost(cost, tmp_path / "c.png")
    quality_cost_plot(quality_cost_frame(board, cost), tmp_path / "q.png")
    drawn = [figures["extrapolation"][0], figures["position"][0], *figures["cost"]]
    seen: dict[str, set] = {}
    for fig in drawn:
        for label, colour in legend_colours(fig).items():
            seen.setdefault(label, set()).add(colour)
    for encoding in ("alibi", "rope", "my-plugin"):
        assert seen[encoding] == {encoding_color(encoding)}, encoding
    assert len(seen["alibi"] | seen["rope"] | seen["learned"]) == 3
    for fig in drawn[:2]:  # the lines themselves, not only the legend
        assert {encoding_color("alibi"), encoding_color("rope")} <= line_colours(fig)


def test_plugin_colours_depend_on_their_name_only():
    from lenbench_testing import plugin_sandbox

    from lenbench.encoding_display import BUILTIN, OTHER_COLORS
    from lenbench.encodings.base import PositionalEncoding
    from lenbench.report.plots._style import encoding_marker

    before = {n: (encoding_color(n), encoding_marker(n)) for n in (*BUILTIN, "zz-plugin", "aa-plugin")}

    class Plugin(PositionalEncoding):  # defined here: its module is not lenbench's
        pass

    with plugin_sandbox():  # registering from this module adopts it as a plugin: no trace for later tests
        ENCODINGS.register("aa-plugin")(Plugin)  # loaded first, it must not take a colour from any other
        ENCODINGS.register("zz-plugin")(Plugin)
        assert {n: (encoding_color(n), encoding_marker(n)) for n in before} == before
    assert encoding_color("zz-plugin") not in {encoding_color(n) for n in BUILTIN}
    # the colour is the hash's, into the shades no built-in has
    assert encoding_color("zz-plugin") == to_rgb(OTHER_COLORS[zlib.crc32(b"zz-plugin") % len(OTHER_COLORS)])


def test_every_variant_has_a_style_of_its_own():
    variants = ["linear", "finetune-linear-x4", "ntk", "dynamic", "yarn", "finetune-yarn-x4", "yarn@4", "llama3"]
    styles = [series_style("rope", v) for v in variants]
    keys = [(s["color"], s["marker"], s["dashes"]) for s in styles]
    assert len(set(keys)) == len(keys)  # fine-tuned and pinned yarn were once drawn alike
    assert series_style("rope", "yarn@4")["marker"] == "s" and series_style("rope", "finetune-yarn-x4")["marker"] == "^"
    assert series_style("rope", "yarn")["color"] == series_style("xpos", "yarn")["color"]


# --- panels left out -----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_board_no_model_learned_is_left_out_and_named(tmp_path, capture, published):
    from lenbench.report.plots._style import ALL_ZERO, NOT_LEARNED, left_out_note
    from lenbench.report.plots.extrapolation import extrapolation_left_out
    from lenbench.report.plots.heatmap import heatmap_left_out

    df, board = published
    assert extrapolation_left_out(df, board) == {"copy (train length 8)": NOT_LEARNED}
    assert heatmap_left_out(board) == {"copy (train length 8)": NOT_LEARNED}
    assert left_out_note(extrapolation_left_out(df, board)) == f" Left out: copy (train length 8): {NOT_LEARNED}."
    for name in ("extrapolation", "heatmap"):
        figures = capture(name)
        PLOTS[name](df, board, tmp_path / f"{name}.png")
        titles = {ax.get_title() for ax in visible_axes(figures[0])}
        assert "copy (train length 8)" not in titles and "passkey (train length 16)" in titles
    # a board learned by one model but at zero everywhere else is kept; all at zero is left out
    zero = load_results([row("copy", e, "none", r, "exact_match", 0.0, s) for e in ("alibi", "rope")
                         for r in (1, 2) for s in (0, 1)] + [row("lm", "rope", "none", r, "perplexity", 5.0 + r)
                                                             for r in (1, 2)])
    from lenbench.report.tables import leaderboard

    zboard = leaderboard(zero)
    zboard.per_task["not_learned"] = False  # as if the threshold were 0: the zero rule alone
    assert extrapolation_left_out(zero, zboard) == {"copy (train length 8)": ALL_ZERO}


def test_when_every_board_would_be_left_out_all_are_drawn(tmp_path, capture):
    from lenbench.report.plots.extrapolation import extrapolation_left_out

    df = load_results([row("copy", e, "none", r, "exact_match", 0.1, s) for e in ("alibi", "rope")
                       for r in (1, 2) for s in (0, 1)])
    figures = capture("extrapolation")
    extrapolation_plot(df, tmp_path / "x.png")
    assert extrapolation_left_out(df) == {}
    assert [ax.get_title() for ax in visible_axes(figures[0])] == ["copy (train length 8)"]


def test_variants_get_their_own_row(tmp_path, capture, published):
    df, board = published
    figures = capture("extrapolation")
    PLOTS["extrapolation"](df, board, tmp_path / "x.png")
    fig = figures[0]
    assert [sub._suptitle.get_text() for sub in fig.subfigs] == ["trained encodings", "rope and its inference-time variants"]
    top, bottom = (set(legend_colours(sub)) for sub in fig.subfigs)
    assert {"alibi", "rope", "learned", "my-plugin"} <= top and not any("+" in label for label in top)
    assert {"rope", "rope+linear", "rope+yarn", "rope+finetune-yarn-x4", "rope+yarn@4"} <= bottom and "alibi" not in bottom


def test_needle_panels_of_models_not_learned_are_left_out(tmp_path, capture, published):
    from lenbench.report.plots.needle import NOT_LEARNED_PANEL, needle_left_out

    df, board = published
    not_learned = board.per_task[(board.per_task["task"] == "passkey") & board.per_task["not_learned"]]
    assert len(not_learned)  # the fixture has some
    expected = {series_label(e, v): NOT_LEARNED_PANEL for e, v in zip(not_learned["encoding"], not_learned["variant"],
                                                                    strict=True)}
    assert needle_left_out(df, board) == expected
    figures = capture("needle")
    PLOTS["needle"](df, board, tmp_path / "n.png")
    titles = [ax.get_title() for ax in visible_axes(figures[0]) if ax.get_title()]
    assert not set(titles) & set(expected) and len(titles) + len(expected) == 9
    footnote = " ".join(t.get_text() for t in figures[0].texts).replace("\n", " ")
    assert NOT_LEARNED_PANEL in footnote and all(name in footnote for name in expected)  # the figure says whom it left out


def test_position_patterns_at_initialisation_or_all_zero_are_not_drawn():
    from lenbench.report.plots.geometry import AT_INITIALISATION, NO_PATTERN, pattern_left_out

    learned = encoding_pattern("learned", length=16, d_model=16, n_heads=2)
    assert learned.at_initialisation and pattern_left_out(learned) == AT_INITIALISATION
    trained = encoding_pattern("learned", length=16, d_model=16, n_heads=2,
                               state={k: v + 1 for k, v in learned_state().items()})
    assert not trained.at_initialisation and pattern_left_out(trained) is None
    assert pattern_left_out(encoding_pattern("nope", length=16, d_model=16, n_heads=2)) == NO_PATTERN
    rope = encoding_pattern("rope", length=16, d_model=16, n_heads=2)
    assert not rope.at_initialisation and pattern_left_out(rope) is None


def learned_state() -> dict:
    from lenbench.encodings import EncodingDims, build_encoding

    return build_encoding("learned", EncodingDims(d_model=16, n_heads=2, max_len=16)).state_dict()


def test_needle_panel_annotates_every_finite_cell_with_readable_text():
    """The needle panel (drawn without seaborn) writes each finite value to 2 decimals at its cell's
    centre, first row at the top, dark text on light cells and white on dark ones (WCAG luminance:
    viridis is dark at 0 and light at 1), and leaves NaN cells blank."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import Normalize

    from lenbench.report.plots.needle import _annotated_heatmap, _luminance

    assert _luminance((1.0, 1.0, 1.0, 1.0)) == pytest.approx(1.0) and _luminance((0.0, 0.0, 0.0, 1.0)) == 0.0
    values = np.array([[0.0, 1.0], [np.nan, 0.456]])  # (depths, lengths)
    fig, ax = plt.subplots()
    _annotated_heatmap(ax, values, Normalize(0.0, 1.0), ["32", "64"], ["0.0-0.5", "0.5-1.0"])
    texts = {(t.get_position(), t.get_text()): t.get_color() for t in ax.texts}
    assert texts == {((0.5, 0.5), "0.00"): "w", ((1.5, 0.5), "1.00"): ".15", ((1.5, 1.5), "0.46"): "w"}
    assert ax.get_ylim() == (2.0, 0.0)  # row 0 at the top
    assert [t.get_text() for t in ax.get_xticklabels()] == ["32", "64"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0.0-0.5", "0.5-1.0"]
    plt.close(fig)


def test_a_dense_length_axis_labels_whole_multiples_and_no_two_labels_that_touch():
    from lenbench.report.plots.extrapolation import spaced_labels

    lengths = [8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 64]
    labels = spaced_labels(lengths, 8)
    assert [x for x, s in zip(lengths, labels, strict=True) if s] == [8, 10, 16, 24, 32, 64]
    shown = [math.log2(x) for x, s in zip(lengths, labels, strict=True) if s and x % 8]
    assert all(abs(a - math.log2(b)) >= 0.3 for a in shown for b in lengths if b % 8 == 0)
    assert spaced_labels([64, 128, 256, 512, 1024], 64) == ["64", "128", "256", "512", "1024"]


# --- no text over text, at the catalog's size -----------------------------------------------------


def _texts(fig):
    """Every visible, non-empty text a reader reads in `fig` (after `fig.canvas.draw()`): each axes'
    tick labels (the ticks inside its view, colour bars included), title, axis labels and texts; the
    legends' entries; the figure's and subfigures' titles and texts."""
    import numpy as np

    out = []
    for ax in visible_axes(fig):
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                loc = tick.get_loc()
                if loc is None or not (lo - 1e-9 * abs(lo) <= loc <= hi + 1e-9 * abs(hi)) or not np.isfinite(loc):
                    continue
                out += [label for label in (tick.label1, tick.label2) if label.get_visible() and label.get_text()]
        out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
    for legend in legends(fig):
        out += [*legend.get_texts(), legend.get_title()]

    def figure_texts(f):
        found = [getattr(f, name, None) for name in ("_suptitle", "_supxlabel", "_supylabel")] + list(f.texts)
        for sub in f.subfigs:
            found += figure_texts(sub)
        return found

    out += figure_texts(fig)
    return [t for t in dict.fromkeys(out) if t is not None and t.get_visible() and t.get_text().strip()]


def text_boxes(fig) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(text, its drawn box x0, y0, x1, y1 in pixels) of every text of a drawn figure (`_texts`)."""
    return [(t.get_text(), tuple(t.get_window_extent(fig.test_renderer).extents)) for t in _texts(fig)]


def text_collisions(fig, tolerance: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of texts of `fig` (as `capture` drew it) whose boxes overlap by more than `tolerance`
    pixels each way: ("128", "256") when tick labels run together, ("8.2", "8.29709") for a colour bar's."""
    import numpy as np

    texts = [text for text, _ in fig.test_texts]
    boxes = np.array([box for _, box in fig.test_texts]).reshape(-1, 4)
    x0, y0, x1, y1 = (boxes[:, i] for i in range(4))
    dx = np.minimum(x1[:, None], x1[None]) - np.maximum(x0[:, None], x0[None])
    dy = np.minimum(y1[:, None], y1[None]) - np.maximum(y0[:, None], y0[None])
    hit = np.triu((dx > tolerance) & (dy > tolerance), k=1)
    return [(texts[i], texts[j]) for i, j in zip(*np.nonzero(hit), strict=True)]


def test_text_collisions_finds_labels_that_run_together():
    """The check itself: two tick labels drawn on top of each other are found, apart ones are not."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.0, 1.0))
    ax.set_xticks([1, 1.01, 5], labels=["128", "256", "far"])
    ax.set_xlim(0, 6)
    fig.canvas.draw()
    fig.test_renderer = fig.canvas.get_renderer()
    fig.test_texts = text_boxes(fig)
    assert text_collisions(fig) == [("128", "256")]
    plt.close(fig)


def catalog_like():
    """A synthetic board of the published catalog's size: every declared encoding and three labelled
    entries (plugin-like names), rope with eight inference-time variants, six tasks at five ratios,
    two seeds; lm with the chance (256) and unigram baselines far above the models' perplexity."""
    from lenbench.encoding_display import BUILTIN

    encodings = [*BUILTIN, "fire-relthresh", "randomized-rope", "ssmax+rope"]
    pairs = [(e, "none") for e in encodings] + [("rope", v) for v in (
        "linear", "finetune-linear-x4", "ntk", "dynamic@2", "yarn", "finetune-yarn-x4", "yarn@4", "llama3")]
    tasks = {"addition": 3, "copy": 8, "lm": 64, "passkey": 32, "reverse": 6, "sort": 8}
    rows = []
    for seed in (0, 1):
        for i, (enc, var) in enumerate(pairs):
            for task, n in tasks.items():
                for ratio in (1, 2, 4, 8, 16):
                    if task == "lm":
                        rows.append(row(task, enc, var, ratio, "perplexity", 8.3 + 0.4 * i * math.log2(ratio) / 4
                                        + 0.1 * seed, seed, train_len=n))
                    else:
                        at_1x = 0.97 if i % 3 else 0.5
                        rows.append(row(task, enc, var, ratio, "exact_match",
                                        at_1x / ratio ** (0.1 * (i % 7) + 0.3) + 0.01 * seed, seed, train_len=n))
        for ratio in (1, 2, 4, 8, 16):
            for name, value in (("chance", 256.0), ("unigram", 24.1)):
                rows.append(row("lm", f"baseline:{name}", "none", ratio, "perplexity", value, seed, train_len=64))
    return load_results(rows)


@pytest.fixture(scope="module")
def catalog_sized():
    from lenbench.report.tables import leaderboard

    df = catalog_like()
    return df, leaderboard(df)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["extrapolation", "heatmap"])
def test_no_text_overlaps_at_the_catalogs_size(tmp_path, capture, catalog_sized, name):
    df, board = catalog_sized
    figures = capture(name)
    PLOTS[name](df, board, tmp_path / f"{name}.png")
    (fig,) = figures
    assert text_collisions(fig) == []


CATALOG = Path(__file__).resolve().parents[2] / "results" / "catalog"


@pytest.mark.slow
@pytest.mark.skipif(not (CATALOG / "cells").is_dir(), reason="results/catalog/ is not published")
def test_no_text_overlaps_in_the_published_catalogs_figures(tmp_path, capture):
    """Every figure of the report, drawn from the published catalog (its cells and kernel timings):
    no two texts overlap (about a minute: the catalog's leaderboard and its figures)."""
    from lenbench.report.build import load_source
    from lenbench.report.cost import quality_cost_frame
    from lenbench.report.figures import FIGURES, FigureInputs
    from lenbench.report.tables import leaderboard

    src = load_source(CATALOG)
    board, cost = leaderboard(src.rows), src.cost()
    inputs = FigureInputs(src.rows, board, cost, quality_cost_frame(board, cost) if cost is not None else None)
    captured = {spec.module: capture(spec.module) for spec in FIGURES}
    drawn = []
    for spec in FIGURES:
        if spec.available(inputs) and (spec.source == "rows" or cost is not None):
            spec.render(inputs, tmp_path / f"{spec.stem}.png")
            drawn.append(spec.stem)
    assert {"extrapolation", "leaderboard_heatmap"} <= set(drawn)
    found = {f"{module} {i}": text_collisions(fig)[:6] for module, figures in captured.items()
             for i, fig in enumerate(figures)}
    assert {name: pairs for name, pairs in found.items() if pairs} == {}


# --- paper-ready: colours, baselines, formats, cost, noise -------------------------------------------


def _lab(color) -> "tuple[float, float, float]":
    """CIELAB (D65) of an sRGB colour: the space where a distance (ΔE*76) is a perceived difference."""
    import numpy as np

    rgb = np.array(to_rgb(color))
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    f = np.cbrt(np.maximum(xyz / np.array([0.95047, 1.0, 1.08883]), (6 / 29) ** 3))
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_every_encoding_has_its_own_look_and_none_is_grey():
    import itertools

    from lenbench.encoding_display import BUILTIN, DASHES, OTHER_COLORS, encoding_look
    from lenbench.report.plots._style import VARIANT_DASHES

    declared = [look.color for look in BUILTIN.values()]
    assert len({(look.color, look.marker, look.dashes) for look in BUILTIN.values()}) == len(BUILTIN)
    labs = {c: _lab(c) for c in [*declared, *OTHER_COLORS]}
    for color, (lightness, a, b) in labs.items():
        assert math.hypot(a, b) >= 25, f"{color} is grey: baselines and faded lines are"
        assert 25 <= lightness <= 82, f"{color} is too pale or too dark to tell apart"
    assert min(math.dist(labs[x], labs[y]) for x, y in itertools.combinations(declared, 2)) >= 20
    assert min(math.dist(labs[x], labs[y]) for x in OTHER_COLORS for y in [*declared, *OTHER_COLORS] if x != y) >= 18
    # plugins (and labelled entries such as the catalog's): a look from the hash, never a declared colour
    for name in ("fire-relthresh", "randomized-rope", "ssmax+rope", "my-plugin"):
        assert encoding_look(name).color in OTHER_COLORS and encoding_look(name).dashes in DASHES
    assert len({encoding_look(n) for n in ("fire-relthresh", "randomized-rope", "ssmax+rope", "rope")}) == 4
    assert not set(DASHES) & set(VARIANT_DASHES)  # a variant's line is never mistaken for a trained encoding's


def _lm_with_chance(values=(9.0, 12.0, 16.0)):
    rows = [row("lm", e, "none", r, "perplexity", v * (1 + 0.1 * i) + 0.01 * s, s, train_len=16)
            for i, e in enumerate(("alibi", "rope")) for r, v in zip((1, 2, 4), values, strict=True) for s in (0, 1)]
    rows += [row("lm", f"baseline:{b}", "none", r, "perplexity", v, s, train_len=16)
             for b, v in (("chance", 256.0), ("unigram", 12.5)) for r in (1, 2, 4) for s in (0, 1)]
    return load_results(rows)


def test_a_baseline_annotates_the_view_the_models_set(tmp_path, capture):
    """lm's chance (256) once set the axis and squashed perplexities of 9-16: the models set the
    view, a baseline inside it is a line, one above it an arrow with its value at the top edge."""
    figures = capture("extrapolation")
    extrapolation_plot(_lm_with_chance(), tmp_path / "x.png")
    (ax,) = [ax for ax in visible_axes(figures[0]) if ax.get_title()]
    low, high = ax.get_ylim()
    assert 8 < high < 40 and low > 1  # the models' span (9 to 17.6 with their bands), not the chance's
    assert [t.get_text() for t in ax.texts] == ["↑ chance 256"]
    greys = [line for line in ax.get_lines() if line.get_marker() in ("None", "") and len(line.get_xdata()) == 3]
    assert any(list(line.get_ydata()) == [12.5] * 3 for line in greys)  # unigram, inside the view: a line
    assert text_collisions(figures[0]) == []


@pytest.mark.parametrize("suffix", ["pdf", "svg"])
def test_vector_figures_are_written_and_undated(tmp_path, suffix):
    from lenbench.report.figures import FORMATS

    assert FORMATS == ("png", "svg", "pdf")
    a = extrapolation_plot(tiny(), tmp_path / f"a.{suffix}").read_bytes()
    b = extrapolation_plot(tiny(), tmp_path / f"b.{suffix}").read_bytes()
    assert a.startswith(b"%PDF") if suffix == "pdf" else b"<svg" in a
    assert a == b  # no creation date: a rebuild is byte-identical


def test_png_is_at_300_dpi(tmp_path):
    from PIL import Image

    from lenbench.report.plots._style import DPI

    path = extrapolation_plot(tiny(), tmp_path / "x.png")
    assert DPI == 300 and Image.open(path).info["dpi"] == pytest.approx((DPI, DPI), abs=0.01)


def test_log_colour_bar_ends_are_rounded():
    from lenbench.report.plots._style import log_ticks, round_out

    assert round_out(8.29709, 18.3527) == (8.2, 19.0)  # the catalog's lm: labels once "8.29709", "18.3527"
    low, high = round_out(8.29709, 18.3527)
    assert log_ticks(low, high) == [8.2, 10, 12, 15, 19]
    for lo, hi in ((0.0123, 0.9), (6.2, 31.9), (1.0, 1000.0), (100.5, 100.7)):
        a, b = round_out(lo, hi)
        assert 0 < a <= lo and b >= hi and all(len(f"{t:g}".replace(".", "").strip("0")) <= 3 for t in log_ticks(a, b))


def _cost(tmp_path):
    from test_page import KERNELS
    from test_results import bench_json

    from lenbench.report.cost import cost_table
    from lenbench.report.timings import load_kernel_timings, load_training_steps

    path = bench_json(tmp_path / "b.json", [], KERNELS)
    return cost_table(load_kernel_timings(path), load_training_steps(path))


def test_cost_at_one_length_is_a_bar_chart(tmp_path, capture):
    from lenbench.report.plots.cost import cost_plot as draw_cost

    cost = _cost(tmp_path)
    one = cost[(cost["T"] == 256) | (cost["dtype"] == "")]
    figures = capture("cost")
    draw_cost(one, tmp_path / "c.png")
    draw_cost(cost, tmp_path / "lines.png")
    bars, lines = figures
    (ax,) = visible_axes(bars)
    timed = one[one["dtype"] != ""]
    assert len(ax.patches) == 2 * timed["encoding"].nunique()  # fused and eager per encoding
    assert [t.get_text() for t in ax.get_xticklabels()] == list(dict.fromkeys(
        e for e, _ in series_order((e, "none") for e in timed["encoding"])))
    assert text_collisions(bars) == [] and text_collisions(lines) == []
    # lines: eager carries its encoding's marker, hollow (not told apart by colour alone)
    eager = [line for ax in visible_axes(lines) for line in ax.get_lines() if line.get_markerfacecolor() == "white"]
    assert eager and all(line.get_marker() not in ("None", "") for line in eager)


def test_quality_cost_does_not_draw_numerical_noise_as_a_spread():
    import matplotlib.pyplot as plt

    from lenbench.report.plots.cost import MIN_RETENTION_SPAN, floor_span

    fig, ax = plt.subplots()
    ax.errorbar([1.0, 2.0], [1e-6, -1e-6], yerr=[[8e-6, 8e-6], [8e-6, 8e-6]])
    floor_span(ax, MIN_RETENTION_SPAN)
    low, high = ax.get_ylim()
    assert high - low == pytest.approx(MIN_RETENTION_SPAN) and low < 0 < high
    fig.canvas.draw()
    assert ax.yaxis.get_offset_text().get_text() == ""  # no "1e-6" over the axis
    ax2 = fig.add_subplot(2, 1, 2)
    ax2.plot([0, 1], [0.0, 0.9])
    before = ax2.get_ylim()
    floor_span(ax2, MIN_RETENTION_SPAN)
    assert ax2.get_ylim() == before  # a real spread is left as it is
    plt.close(fig)
