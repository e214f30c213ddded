"""Figures render from a tiny results set, in PNG and SVG, with one fixed style per line."""

import math

import pytest

from lenbench.encodings import ENCODINGS
from lenbench.report.geometry import encoding_pattern, has_fixed_pattern
from lenbench.report.plots._style import ENCODING_COLORS, encoding_color, series_style, variant_dashes
from lenbench.report.plots.extrapolation import extrapolation_plot, task_chance
from lenbench.report.plots.geometry import encoding_heatmap
from lenbench.report.plots.heatmap import leaderboard_heatmap
from lenbench.report.rows import load_results, series_order

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
                                None if failed else 0.9 / ratio ** (0.2 * (i + 1)) + 0.01 * seed, seed))
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


def test_svg_is_reproducible(tmp_path):
    a = extrapolation_plot(tiny(), tmp_path / "a.svg").read_bytes()
    b = extrapolation_plot(tiny(), tmp_path / "b.svg").read_bytes()
    assert a == b


def test_fixed_palette_and_order():
    names = ENCODINGS.names()
    # colour from the registry index, never from what else is in the figure
    assert encoding_color("rope") == ENCODING_COLORS[names.index("rope")]
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
    if len(names) < len(ENCODING_COLORS):
        assert encoding_color("my-label") not in [encoding_color(n) for n in names]
    # one canonical order: registry order of encodings, then "none" before the rope types in registry order
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
