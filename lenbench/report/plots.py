"""Figures: metric against length, the leaderboard heatmap and the position-encoding heatmap.

Every figure is written with the non-interactive Agg backend, so plotting works on machines
without a display, in the format the path's suffix names (PNG or SVG), atomically (temporary
file + os.replace) and reproducibly (no date in SVGs, fixed SVG ids).

Every figure shares one style per line: the colour comes from the encoding's index in the
encoding registry (`ENCODING_COLORS`, 20 fixed colours; a label outside the registry gets a
colour from a hash of its name), the dash pattern from the variant's rope_type index in the
rope_type registry (solid for the plain encoding), the marker says whether the variant was
fine-tuned; lines and legends follow `lenbench.report.rows.series_order`. Adding results never
shuffles colours.
"""

from __future__ import annotations

import contextlib
import math
import warnings
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import LogNorm, Normalize  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: E402

from lenbench.atomic import atomic_path, is_disk_full  # noqa: E402
from lenbench.encodings import ENCODINGS, EncodingDims, PositionalEncoding, build_encoding  # noqa: E402
from lenbench.report.rows import (  # noqa: E402
    BASE_VARIANT,
    load_results,
    primary_metric,
    series_label,
    series_order,
    task_order,
    variant_rope_type,
    whole_length,
)
from lenbench.report.tables import Leaderboard, leaderboard, ratio_label  # noqa: E402

# --- saving -------------------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet():
    """Silence seaborn's own deprecation chatter (matplotlib API changes it has not caught up with)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield

_RC = {"svg.hashsalt": "lenbench", "svg.fonttype": "path"}


def save_figure(fig, path: str | Path, *, dpi: int = 100) -> Path:
    """Save `fig` to `path` (format from the suffix) atomically and reproducibly, then close it."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    metadata = {"Date": None} if fmt == "svg" else None
    try:
        with atomic_path(path) as tmp, plt.rc_context(_RC):
            fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight", metadata=metadata)
    finally:
        plt.close(fig)
    return path


def _rotary_probe(enc: PositionalEncoding, head_dim: int) -> torch.Tensor:
    """A query with 1 on the first channel of every rotated pair and 0 elsewhere: rotated to
    position m, its first channels read cos(m·θ_i) (times xPos' decay), one per frequency θ_i."""
    inner = getattr(enc, "inner", enc)
    layout = getattr(inner, "layout", "half")
    rot = int(getattr(inner, "rot_dim", 0) or head_dim)
    probe = torch.zeros(head_dim)  # (Dh,)
    if layout == "interleaved":
        probe[0:rot:2] = 1.0
    else:
        probe[: rot // 2] = 1.0
    return probe


def encoding_matrix(enc: PositionalEncoding, length: int) -> tuple[torch.Tensor, str, str]:
    """The position × channel matrix an encoding applies, its x-axis label and its y-axis label.

    - absolute encodings: `embed(0, pos)`, the vector added at each position (T, D);
    - rotary encodings: cos(m·θ_i) per frequency pair i (`_rotary_probe` rotated to position m),
      (T, pairs), the rotation RoPE applies (xPos: with its decay);
    - bias encodings: the bias from the last query (position T−1) to each key, per head (T, H).
    - no positional signal (nope): zeros.
    """
    d = enc.dims
    pos = torch.arange(length)[None]  # (1, T)
    with torch.no_grad():
        emb = enc.embed(torch.zeros(1, length, d.d_model), pos)[0]  # (T, D)
        if emb.abs().sum() > 0:
            return emb, "embedding dimension", "position"
        probe = _rotary_probe(enc, d.head_dim)  # (Dh,)
        q = probe.expand(1, 1, length, d.head_dim).contiguous()  # (1, 1, T, Dh)
        rotated, _ = enc.rotate(q, q.clone(), pos)  # (1, 1, T, Dh)
        if not torch.equal(rotated, q):
            return rotated[0, 0][:, probe > 0], "frequency pair i (θ_i falls with i)", "position m"  # (T, pairs)
        bias = enc.bias(pos, pos)  # (1, H, T, T) or None
        if bias is not None:
            return bias[0, :, -1, :].T, "head", f"key position (query at {length - 1})"  # (T, H)
    return torch.zeros(length, d.d_model), "embedding dimension", "position"


def _tick_step(n: int, target: int = 8) -> int:
    """A round step giving about `target` labelled ticks over n cells."""
    raw = max(1, n // target)
    return min((s for s in (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 256, 500, 512, 1000, 1024)
                if s >= raw), default=raw)


def encoding_heatmap(
    encoding: str, path: str | Path, *, length: int = 256, d_model: int = 128, n_heads: int = 8,
    state: dict | None = None, note: str = "", **params
) -> Path:
    """Render an encoding's position matrix (see `encoding_matrix`) to PNG or SVG, both axes
    labelled with their units and ticked.

    For `sinusoidal` this is the classic striped picture: fast oscillation in the first dimensions,
    slow waves in the last.

    Args:
        encoding: registered encoding name.
        path: output file; the suffix (.png, .svg) chooses the format.
        length: number of positions (rows).
        d_model, n_heads: model geometry the encoding is built for (the trained model's, see
            `encoding_geometries`).
        state: the encoding's trained parameters (``pos_enc.*`` of a checkpoint), or None: the
            pattern at initialisation (seed 0), which `note` should then say.
        note: shown under the title (where the geometry and weights come from).
        params: encoding parameters.
    """
    with torch.random.fork_rng(devices=[]):  # trainable encodings start from a fixed init: same picture every run
        torch.manual_seed(0)
        enc = build_encoding(encoding, EncodingDims(d_model=d_model, n_heads=n_heads, max_len=max(length, 1)), **params)
    if state:
        enc.load_state_dict(state, strict=False)
    enc.eval()
    matrix, xlabel, ylabel = encoding_matrix(enc, length)
    values = matrix.float().numpy()
    with plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        fig, ax = plt.subplots(figsize=(PAPER_WIDTH / 2, 2.8))
        # rasterized: one image instead of T × D vector patches, so the SVG stays small.
        with _quiet():
            sns.heatmap(values, ax=ax, cmap="RdBu_r", center=0, xticklabels=_tick_step(values.shape[1]),
                        yticklabels=_tick_step(values.shape[0], 10), rasterized=True)
        ax.tick_params(axis="x", rotation=0, labelsize=6)
        ax.tick_params(axis="y", rotation=0, labelsize=6)
        title = f"{encoding} (d_model {d_model}, {n_heads} heads)"
        ax.set(xlabel=xlabel, ylabel=ylabel)
        ax.set_title(title + (f"\n{note}" if note else ""), fontsize=PAPER_FONT_SIZE)
        return save_figure(fig, path)


def has_fixed_pattern(encoding: str, *, length: int = 256, d_model: int = 128, n_heads: int = 8) -> bool:
    """Whether an encoding's position matrix is fixed by its definition: no trainable parameters
    (a learned table or bias would only show its random initialisation) and not all zeros (NoPE)."""
    try:
        enc = build_encoding(encoding, EncodingDims(d_model=d_model, n_heads=n_heads, max_len=length))
        if any(p.requires_grad for p in enc.parameters()):
            return False
        matrix = encoding_matrix(enc.eval(), length)[0]
        return bool(matrix.abs().sum() > 0)
    except Exception:  # an encoding that cannot be drawn this way (e.g. contextual)
        return False


def safe_encoding_heatmap(encoding: str, path: str | Path, **kwargs) -> Path | None:
    """`encoding_heatmap`, or None (with nothing written) when the encoding cannot be drawn."""
    try:
        return encoding_heatmap(encoding, path, **kwargs)
    except Exception as err:  # an encoding without a position matrix of its own (e.g. contextual) is skipped
        plt.close("all")
        if is_disk_full(err):  # not the encoding's fault: the report cannot be written
            raise
        return None


def encoding_geometries(df: pd.DataFrame, results_dir: str | Path | None = None, *,
                        max_positions: int = 256) -> dict[str, dict]:
    """`encoding_heatmap` keyword arguments for every registered encoding of a results frame.

    Geometry (d_model, n_heads, encoding parameters) and trained weights come from the run: the
    first finished cell of the encoding in ``results_dir/cells`` (lm first, the longest context) and
    its checkpoint ``results_dir/checkpoints/<train_id>.pt``; without a run directory, from the
    suite preset named in the rows; else the model defaults (64, 4). Positions: the cell's longest
    evaluated sequence, at most `max_positions`. An encoding with trainable parameters but no
    checkpoint at hand is drawn at initialisation, and its note says so.
    """
    from lenbench.report.stats import is_baseline

    names = [e for e in dict.fromkeys(df["encoding"]) if not is_baseline(e) and e in ENCODINGS.names()]
    cells: dict[str, dict] = {}
    if results_dir is not None and (Path(results_dir) / "cells").is_dir():
        import json

        for path in sorted((Path(results_dir) / "cells").glob("*.json")):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            config = data.get("config") or {}
            enc = config.get("encoding")
            if data.get("status") == "ok" and enc in names and (enc not in cells or config.get("task") == "lm"):
                cells[enc] = data
    preset = None
    try:
        from lenbench.config import list_suites, load_suite

        suites = sorted(set(df["suite"]) & set(list_suites()))
        preset = load_suite(suites[0]) if suites else None
    except Exception:  # noqa: BLE001 - a preset that no longer loads: fall back to the defaults
        preset = None
    out = {}
    for encoding in names:
        rows = df[df["encoding"] == encoding]
        kwargs: dict = {"length": int(min(max_positions, rows["eval_len"].max() if len(rows) else max_positions))}
        data = cells.get(encoding)
        if data is not None:
            config = data["config"]
            kwargs.update(d_model=int(config["model"]["d_model"]), n_heads=int(config["model"]["n_heads"]),
                          **dict(config.get("encoding_params") or {}))
            checkpoint = Path(results_dir) / "checkpoints" / f"{data.get('train_id', '')}.pt"
            note = f"{data.get('title', '')}: geometry of the run"
            if checkpoint.is_file():
                try:
                    from lenbench.run.engine import load_checkpoint_bytes

                    state, _ = load_checkpoint_bytes(checkpoint.read_bytes(), torch.device("cpu"))
                    kwargs["state"] = {k[len("pos_enc."):]: v for k, v in state.items() if k.startswith("pos_enc.")}
                    note += ", trained weights"
                except Exception:  # noqa: BLE001 - an unreadable checkpoint: draw the initialisation
                    pass
        elif preset is not None:
            kwargs.update(d_model=preset.model.d_model, n_heads=preset.model.n_heads)
            spec = next((e for e in preset.encodings if e.name == encoding), None)
            kwargs.update(dict(spec.params) if spec is not None else {})
            note = f"geometry of the {preset.name} suite"
        else:
            kwargs.update(d_model=64, n_heads=4)
            note = "default geometry"
        trainable = False
        try:
            probe = build_encoding(encoding, EncodingDims(d_model=kwargs["d_model"], n_heads=kwargs["n_heads"],
                                                          max_len=kwargs["length"]))
            trainable = any(p.requires_grad for p in probe.parameters())
        except Exception:  # noqa: BLE001
            pass
        if trainable and "state" not in kwargs:
            note += ", at initialisation (no checkpoint)"
        kwargs["note"] = note
        out[encoding] = kwargs
    return out


# --- the shared style of every line -------------------------------------------------------------

_TAB20 = sns.color_palette("tab20", 20)
#: 20 fixed colours: the ten strong tab20 shades first, then the ten light ones.
ENCODING_COLORS: list[tuple[float, float, float]] = [_TAB20[i] for i in (*range(0, 20, 2), *range(1, 20, 2))]
#: Dash patterns for variants, indexed by the rope_type's registry index (solid = the plain encoding).
VARIANT_DASHES: list[tuple[float, ...]] = [(4, 1.5), (1, 1), (3, 1.25, 1.5, 1.25), (5, 1, 1, 1), (2, 2, 6, 2),
                                           (6, 2), (1, 2, 1, 2, 4, 2), (3, 3)]


def _stable_index(name: str, n: int) -> int:
    return zlib.crc32(name.encode()) % n


def encoding_color(encoding: str) -> tuple[float, float, float]:
    names = ENCODINGS.names()
    n = len(ENCODING_COLORS)
    if encoding in names:
        index = names.index(encoding)
    elif len(names) < n:  # other labels: a colour no registered encoding has, chosen by a hash of the label
        index = len(names) + _stable_index(encoding, n - len(names))
    else:
        index = _stable_index(encoding, n)
    return ENCODING_COLORS[index % n]


def variant_dashes(variant: str) -> tuple[float, ...] | str:
    """"" (solid) for the plain encoding, else a dash pattern fixed by the variant's rope_type."""
    if variant == BASE_VARIANT:
        return ""
    from lenbench.encodings.rope_scaling import ROPE_TYPES

    rope_type = variant_rope_type(variant)
    index = ROPE_TYPES.names().index(rope_type) if rope_type else _stable_index(variant, len(VARIANT_DASHES))
    return VARIANT_DASHES[index % len(VARIANT_DASHES)]


def variant_marker(variant: str) -> str:
    if variant == BASE_VARIANT:
        return "o"
    rope_type = variant_rope_type(variant)
    if rope_type is None:
        return "D"
    return "o" if variant == rope_type else "^"


#: Hues of inference-time variants, indexed by the rope_type's registry index: seaborn's "dark"
#: palette, mixed with the family's colour (`VARIANT_FAMILY_MIX`) so a family's lines stay related.
VARIANT_COLORS: list[tuple[float, float, float]] = list(sns.color_palette("dark", 10))
VARIANT_FAMILY_MIX = 0.25


def series_color(encoding: str, variant: str) -> tuple[float, float, float]:
    """The encoding's colour for its trained model; for a variant a colour of its own (by rope_type,
    so `rope+yarn` and `xpos+yarn` share a hue), a quarter of it the family's colour."""
    family = encoding_color(encoding)
    if variant == BASE_VARIANT:
        return family
    from lenbench.encodings.rope_scaling import ROPE_TYPES

    rope_type = variant_rope_type(variant)
    index = ROPE_TYPES.names().index(rope_type) if rope_type else _stable_index(variant, len(VARIANT_COLORS))
    hue = VARIANT_COLORS[index % len(VARIANT_COLORS)]
    if variant != rope_type and rope_type:  # a fine-tuned or re-parametrised variant: a darker shade of its hue
        hue = tuple(0.7 * c for c in hue)
    return tuple(float((1 - VARIANT_FAMILY_MIX) * h + VARIANT_FAMILY_MIX * f) for h, f in zip(hue, family, strict=True))


def series_style(encoding: str, variant: str) -> dict:
    """Colour (`series_color`), dashes and marker of the line of (encoding, variant) in every figure."""
    return {"color": series_color(encoding, variant), "dashes": variant_dashes(variant), "marker": variant_marker(variant)}


def legend_handles(pairs: list[tuple[str, str]]) -> list[Line2D]:
    handles = []
    for encoding, variant in pairs:
        style = series_style(encoding, variant)
        handle = Line2D([], [], color=style["color"], marker=style["marker"], markersize=5, linewidth=1.6,
                        label=series_label(encoding, variant))
        if style["dashes"]:
            handle.set_dashes(style["dashes"])
        handles.append(handle)
    return handles


def task_chance(task: str) -> float | None:
    """The chance-level token accuracy of a task (default parameters), or None."""
    try:
        from lenbench.tasks import build_task

        chance = build_task(task).chance
        return float(chance) if chance is not None else None
    except Exception:  # unknown task, or one that cannot be built here (e.g. a missing corpus)
        return None


# --- metric against length ----------------------------------------------------------------------


def _plain_log_labels(axis) -> None:
    """Label a log axis 5, 10, 20 rather than 5×10⁰, 10¹, 2×10¹."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


def _boards(df: pd.DataFrame) -> list[tuple[str, int, str, pd.DataFrame]]:
    """(task, train_len, primary metric, rows of that metric) in canonical task order; whole-length
    rows only (bucketed rows have figures of their own)."""
    out = []
    df = whole_length(df)
    for task in task_order(df["task"]):
        tdf = df[df["task"] == task]
        metric = primary_metric(task, tdf["metric"].unique())
        mdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(mdf["train_len"].unique()):
            out.append((task, int(train_len), metric, mdf[mdf["train_len"] == train_len]))
    return out


#: A two-column paper's text width in inches (a figure* in a NeurIPS/ICML/ACL template); report
#: figures are this wide, panels wrapping `PANEL_COLUMNS` to a row, at `PAPER_FONT_SIZE`.
PAPER_WIDTH = 6.75
PANEL_COLUMNS = 2
PAPER_FONT_SIZE = 8


def _grid(n: int, width: float, height: float, ncols: int = 3):
    ncols = min(ncols, max(1, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


#: Line styles of baseline rows ("baseline:<name>"): grey, no marker.
BASELINE_STYLES = {"chance": {"color": "0.45", "dashes": (1, 1.5)}, "repeat-previous": {"color": "0.3", "dashes": (5, 2, 1, 2)},
                   "unigram": {"color": "0.3", "dashes": (6, 2)}}
NOT_LEARNED_ALPHA = 0.3


def baseline_style(encoding: str) -> dict:
    """Colour and dashes of a baseline's line (grey; chance dotted)."""
    name = encoding.split(":", 1)[-1]
    return BASELINE_STYLES.get(name, {"color": "0.35", "dashes": (3, 1.5, 1, 1.5, 1, 1.5)})


def _draw_series(ax, xs, mean, lo, hi, style: dict, alpha: float, marker: str | None) -> None:
    finite = np.isfinite(mean)
    if not finite.any():
        return
    (line,) = ax.plot(xs[finite], mean[finite], color=style["color"], marker=marker, markersize=5 if marker else 0,
                      linewidth=1.6 if marker else 1.3, alpha=alpha)
    if style["dashes"]:
        line.set_dashes(style["dashes"])
    band = finite & np.isfinite(lo) & np.isfinite(hi)
    if band.any() and (hi[band] > lo[band]).any():
        ax.fill_between(xs[band], lo[band], hi[band], color=style["color"], alpha=0.15 * alpha, linewidth=0)


def extrapolation_plot(source, path: str | Path, *, board: Leaderboard | None = None) -> Path:
    """The primary metric against evaluation length, one panel per task (and training length).

    log2 x axis at the evaluated lengths, a dashed vertical line at the training length, one line
    per (encoding, variant) in the shared style (see the module docstring): the mean over seeds
    with its 95 % hierarchical bootstrap band (`lenbench.report.stats`); a model that did not learn the
    task at 1× (`not_learned`) is drawn faded. Baselines (``baseline:<name>`` rows: chance,
    repeat-previous, unigram) are grey lines without markers; results without baseline rows get
    a dotted chance line for token accuracy. × marks at the bottom where every seed failed;
    perplexity on a log y axis.

    Args:
        source: anything `load_results` takes (a tidy frame, a results directory, CSV or benchmark JSON).
        path: output file; the suffix (.png, .svg) chooses the format.
        board: the precomputed `leaderboard(source)`, if at hand.
    """

    df = load_results(source)
    boards = _boards(df)
    if not boards:
        raise ValueError("extrapolation_plot: no rows to plot")
    board = board if board is not None else leaderboard(df)
    with plt.rc_context({"font.size": PAPER_FONT_SIZE}):
        return _extrapolation_figure(df, boards, board, path)


def _extrapolation_figure(df: pd.DataFrame, boards, board: Leaderboard, path: str | Path) -> Path:
    from lenbench.report.stats import is_baseline

    fig, axes = _grid(len(boards), PAPER_WIDTH / PANEL_COLUMNS, 2.5, ncols=PANEL_COLUMNS)
    all_pairs = series_order((e, v) for e, v in zip(df["encoding"], df["variant"], strict=True) if not is_baseline(e))
    baselines = sorted({e for e in df["encoding"] if is_baseline(e)})
    any_not_learned = bool(board.per_task["not_learned"].any()) if len(board.per_task) else False
    for ax, (task, train_len, metric, bdf) in zip(axes, boards, strict=True):
        wide = board.wide[(board.wide["task"] == task) & (board.wide["train_len"] == train_len)]
        ratios = sorted(bdf["ratio"].unique())
        cols = [ratio_label(r) for r in ratios]
        eval_len = bdf.groupby("ratio")["eval_len"].first()
        xs = np.array([float(eval_len[r]) for r in ratios])
        for r in wide.to_dict("records"):
            mean, lo, hi = (np.array([r.get(f"{c}{suffix}", np.nan) for c in cols], dtype=float)
                            for suffix in ("", "_ci_low", "_ci_high"))
            if r["kind"] == "baseline":
                _draw_series(ax, xs, mean, lo, hi, baseline_style(r["encoding"]), 1.0, None)
            else:
                style = series_style(r["encoding"], r["variant"])
                _draw_series(ax, xs, mean, lo, hi, style, NOT_LEARNED_ALPHA if r["not_learned"] else 1.0, style["marker"])
        data = bdf.assign(series=[series_label(e, v) for e, v in zip(bdf["encoding"], bdf["variant"], strict=True)])
        failed = data.groupby(["encoding", "variant", "eval_len"], sort=True)["value"].apply(lambda v: v.isna().all())
        for (encoding, variant, length), all_failed in failed.items():
            if all_failed:
                color = baseline_style(encoding)["color"] if is_baseline(encoding) else series_style(encoding, variant)["color"]
                ax.plot([length], [0.02], transform=ax.get_xaxis_transform(), marker="x", linestyle="none",
                        color=color, markersize=6, clip_on=False)
        ax.set_xscale("log", base=2)
        lengths = sorted(data["eval_len"].unique())
        ax.set_xticks(lengths, labels=[str(x) for x in lengths])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.axvline(train_len, color="0.25", linestyle="--", linewidth=1.0, zorder=0)
        ax.set_xlim(lengths[0] / 2**0.25, lengths[-1] * 2**0.25)
        if metric in ("exact_match", "token_accuracy"):
            ax.set_ylim(-0.03, 1.03)  # accuracies on their whole range
        if metric == "token_accuracy" and not (wide["kind"] == "baseline").any():
            chance = task_chance(task)
            if chance is not None:
                ax.axhline(chance, color=BASELINE_STYLES["chance"]["color"], linestyle=":", linewidth=1.2, zorder=0)
                low, high = ax.get_ylim()
                if chance < low or chance > high:  # keep the chance line in view
                    pad = 0.05 * (max(high, chance) - min(low, chance))
                    ax.set_ylim(min(low, chance - pad), max(high, chance + pad))
        values = bdf.loc[bdf["value"].notna() & ~bdf["encoding"].map(is_baseline), "value"].to_numpy(dtype=float)
        if metric in ("perplexity",) and len(values) and (values > 0).all():  # always log: ratios read as distances
            ax.set_yscale("log")
            _plain_log_labels(ax.yaxis)
        arrow = "↑" if metric in ("token_accuracy", "exact_match") else "↓"
        ax.set(title=f"{task} (train length {train_len})", xlabel="evaluation length (log2)",
               ylabel=f"{metric} {arrow}")
        ax.grid(True, which="major", alpha=0.3)
    extra = [Line2D([], [], color="0.25", linestyle="--", linewidth=1.0, label="training length")]
    if not baselines:
        extra.append(Line2D([], [], color="0.45", linestyle=":", linewidth=1.2, label="chance"))
    for encoding in baselines:
        handle = Line2D([], [], color=baseline_style(encoding)["color"], linewidth=1.3, label=encoding)
        handle.set_dashes(baseline_style(encoding)["dashes"])
        extra.append(handle)
    extra.append(Line2D([], [], color="0.3", marker="x", linestyle="none", label="failed (all seeds)"))
    if any_not_learned:
        extra.append(Line2D([], [], color="0.3", alpha=NOT_LEARNED_ALPHA, linewidth=1.6, label="faded: not learned at 1×"))
    if len(fig.axes) > len(axes):  # an odd panel count leaves a free slot in the grid: the legend goes there
        slot = fig.axes[len(axes)]
        slot.set_visible(True)
        slot.axis("off")
        slot.legend(handles=legend_handles(all_pairs) + extra, loc="center", frameon=False, fontsize=6.5, ncol=2)
    else:
        fig.legend(handles=legend_handles(all_pairs) + extra, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   frameon=False, fontsize=6.5, ncol=4)
    seeds = df["seed"].nunique()
    fig.suptitle(f"{metric_summary(boards)} against evaluation length "
                 f"({seeds} seed{'s' if seeds != 1 else ''}, mean and 95 % bootstrap band)", fontsize=PAPER_FONT_SIZE + 1)
    fig.tight_layout()
    return save_figure(fig, path)


def metric_summary(boards) -> str:
    metrics = list(dict.fromkeys(m for _, _, m, _ in boards))
    return " / ".join(metrics)


# --- leaderboard heatmap ------------------------------------------------------------------------


def _cell_text(value: float, metric: str) -> str:
    if not math.isfinite(value):
        return ""
    if metric in ("token_accuracy", "exact_match"):
        return f"{value:.2f}"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:.3g}"


def leaderboard_heatmap(source, path: str | Path, *, board: Leaderboard | None = None) -> Path:
    """The leaderboard as heatmaps: (encoding, variant) × length ratio, primary metric (mean over
    seeds), one panel per task; brighter is better; "fail" marks a failed length; a model that
    did not learn the task at 1× is veiled grey, hatched and labelled "(not learned)".

    Args:
        source: anything `load_results` takes.
        path: output file (.png or .svg).
        board: the precomputed `leaderboard(source)`, if at hand.
    """
    df = load_results(source)
    board = board if board is not None else leaderboard(df)
    wide = board.wide
    keys = list(dict.fromkeys(zip(wide["task"], wide["train_len"], strict=True)))
    if not keys:
        raise ValueError("leaderboard_heatmap: no rows to plot")
    n_rows = max(int(((wide["task"] == t) & (wide["train_len"] == n)).sum()) for t, n in keys)
    fig, axes = _grid(len(keys), 5.2, 0.9 + 0.32 * n_rows)
    for ax, (task, train_len) in zip(axes, keys, strict=True):
        rows = wide[(wide["task"] == task) & (wide["train_len"] == train_len)]
        metric = rows["metric"].iloc[0]
        hib = bool(rows["higher_is_better"].iloc[0])
        ratios = sorted(df.loc[(df["task"] == task) & (df["train_len"] == train_len), "ratio"].unique())
        cols = [ratio_label(r) for r in ratios]
        labels = [f"{sr} (not learned)" if nl else sr for sr, nl in zip(rows["series"], rows["not_learned"], strict=True)]
        matrix = rows.set_index(pd.Index(labels, name="series"))[cols].astype(float)
        values = matrix.to_numpy()
        models = values[(rows["kind"] != "baseline").to_numpy()] if "kind" in rows else values
        finite = models[np.isfinite(models)]  # the colour scale spans the models; baselines may clip
        if not len(finite):
            finite = values[np.isfinite(values)]
        norm = None
        if metric in ("exact_match", "token_accuracy"):
            norm = Normalize(vmin=0.0, vmax=1.0)
        elif metric == "perplexity" and len(finite) and (finite > 0).all() and finite.max() > finite.min():
            norm = LogNorm(vmin=float(finite.min()), vmax=float(finite.max()))
        elif len(finite):
            norm = Normalize(vmin=float(finite.min()), vmax=float(finite.max()))
        annot = [[_cell_text(v, metric) for v in row] for row in values]
        with _quiet():
            sns.heatmap(matrix, ax=ax, cmap="viridis" if hib else "viridis_r", annot=np.array(annot, dtype=object),
                        fmt="", norm=norm, annot_kws={"fontsize": 7},
                        cbar_kws={"label": f"{metric} {'↑' if hib else '↓'}"}, linewidths=0.5, linecolor="white")
        if isinstance(norm, LogNorm):
            _plain_log_labels(ax.collections[0].colorbar.ax.yaxis)
        for i, j in zip(*np.where(np.isnan(values)), strict=True):
            ax.text(j + 0.5, i + 0.5, "fail", ha="center", va="center", fontsize=7, color="0.3")
        for i, not_learned in enumerate(rows["not_learned"]):  # grey veil and hatching over a not-learned row
            if not_learned:
                ax.add_patch(Rectangle((0, i), len(cols), 1, facecolor="white", alpha=0.55, hatch="//",
                                       edgecolor="0.5", linewidth=0))
        ax.set(title=f"{task} (train length {train_len})", xlabel="length ratio (eval / train)", ylabel="")
        ax.tick_params(axis="y", rotation=0)
    fig.suptitle("lenbench leaderboard: primary metric by length ratio (brighter is better)")
    fig.tight_layout()
    return save_figure(fig, path)


# --- cost ---------------------------------------------------------------------------------------


def cost_plot(cost: pd.DataFrame, path: str | Path) -> Path:
    """Kernel time against sequence length, log-log, one line per encoding, one panel per dtype.

    Solid: the fused implementation (`lenbench.report.tables.cost_table`'s ``fused_s``); dashed, same
    colour: the eager reference; black: unbiased causal SDPA (what `nope` attends with), recovered
    from ``ratio_to_sdpa``. Colours are the encodings' colours of every other figure.
    """
    timed = cost[cost["dtype"] != ""]
    if timed.empty:
        raise ValueError("cost_plot: no kernel timings to plot")
    dtypes = sorted(set(timed["dtype"]), key=lambda d: (d != "fp32", d))
    with _quiet():
        fig, axes = _grid(len(dtypes), 3.6, 3.0)
        for ax, dtype in zip(axes, dtypes, strict=True):
            d = timed[timed["dtype"] == dtype]
            for encoding, g in d.groupby("encoding", sort=False):
                color = encoding_color(encoding)
                ax.plot(g["T"], g["fused_s"], color=color, marker="o", markersize=3, linewidth=1.4, label=encoding)
                eager = g[g["eager_s"].notna()]
                if len(eager):
                    (line,) = ax.plot(eager["T"], eager["eager_s"], color=color, linewidth=0.9, alpha=0.7)
                    line.set_dashes((4, 2))
            sdpa = d[d["ratio_to_sdpa"].notna()].drop_duplicates("T")
            if len(sdpa):
                ax.plot(sdpa["T"], sdpa["fused_s"] / sdpa["ratio_to_sdpa"], color="black", linewidth=1.8,
                        label="SDPA (nope)")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(sorted(set(d["T"])))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("sequence length T")
            ax.set_ylabel("seconds per call")
            ax.set_title(f"{dtype}: fused (solid) vs eager (dashed)", fontsize=9)
            ax.grid(True, which="major", alpha=0.3)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=5, fontsize=7, frameon=False)
        fig.tight_layout()
    return save_figure(fig, path)


def quality_cost_plot(points: pd.DataFrame, path: str | Path) -> Path:
    """Retention past the training length against training-step cost, one panel per task.

    x: the encoding's training step relative to `nope` (`lenbench.report.tables.quality_cost_frame`);
    y: retention (`lenbench.report.stats`) with its 95 % interval as error bars; the Pareto front (cheaper
    and better than every other learned model it is not dominated by) joined by a line and ringed;
    not-learned models faded and never on the front.
    """
    if points.empty:
        raise ValueError("quality_cost_plot: no model with both a retention and a training-step timing")
    boards = list(points.groupby(["task", "train_len"], sort=False))
    with _quiet():
        fig, axes = _grid(len(boards), 3.2, 2.8)
        for ax, ((task, train_len), g) in zip(axes, boards, strict=True):
            for r in g.to_dict("records"):
                y = r["retention"] if math.isfinite(r["retention"]) else np.nan
                lo, hi = r["retention_ci_low"], r["retention_ci_high"]
                err = [[y - lo], [hi - y]] if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(y) else None
                alpha = NOT_LEARNED_ALPHA if r["not_learned"] else 1.0
                color = encoding_color(r["encoding"])
                ax.errorbar([r["cost"]], [y], yerr=err, fmt="o", color=color, alpha=alpha, markersize=5, capsize=2)
                if math.isfinite(y):
                    ax.annotate(r["encoding"] + (" (n/l)" if r["not_learned"] else ""), (r["cost"], y), fontsize=6,
                                xytext=(3, 3), textcoords="offset points", alpha=alpha)
            front = g[g["pareto"]].sort_values("cost")
            if len(front):
                ax.plot(front["cost"], front["retention"], color="black", linewidth=1.0, linestyle=":", zorder=0)
                ax.scatter(front["cost"], front["retention"], s=90, facecolors="none", edgecolors="black",
                           linewidths=0.9, label="Pareto front")
            ax.axvline(1.0, color="0.6", linewidth=0.8, linestyle="--")
            ax.set_xlabel("training step / nope's (lower is cheaper)")
            ax.set_ylabel("retention past train length")
            ax.set_title(f"{task} (train length {train_len})", fontsize=9)
            ax.grid(True, alpha=0.3)
        fig.tight_layout()
    return save_figure(fig, path)


# --- bucketed measurements: loss by position, needle depth × length (issue 11) -------------------


def _bucketed(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Rows whose bucket is of `kind` ("pos", "depth") that succeeded, with the bucket's bounds
    `lo` / `hi` and `series` added."""
    from lenbench.evaluate import parse_bucket

    if "bucket" not in df.columns:
        return df.iloc[0:0].assign(lo=[], hi=[], series=[])
    sel = df[df["bucket"].str.startswith(f"{kind}:") & df["value"].notna()]
    spans = [parse_bucket(b) for b in sel["bucket"]]
    return sel.assign(lo=[s[1] for s in spans], hi=[s[2] for s in spans],
                      series=[series_label(e, v) for e, v in zip(sel["encoding"], sel["variant"], strict=True)])


def has_bucket_rows(source, kind: str) -> bool:
    """Whether the results hold successful bucketed rows of `kind` ("pos" or "depth")."""
    return len(_bucketed(load_results(source), kind)) > 0


def position_loss_plot(source, path: str | Path) -> Path:
    """Loss by position within the evaluation window, one line per (encoding, variant) at the
    longest evaluated length, one panel per lm task (and training length): the figure of Press et
    al. 2022 (ALiBi, fig. 3), Sun et al. 2022 (xPos) and Ding et al. 2024 (LongRoPE).

    x: target position (bucket midpoint, log2 axis), y: mean nll (nats) over the bucket and seeds;
    a dashed vertical line at the training length. A curve that keeps falling past the training
    length uses the longer context; one that flattens there ignores it; one that rises is hurt.

    Args:
        source: anything `load_results` takes, holding "pos:…" bucket rows (`evaluate_lm_context`).
        path: output file (.png or .svg).
    """
    df = _bucketed(load_results(source), "pos")
    df = df[df["metric"] == "nll"]
    keys = list(dict.fromkeys(zip(df["task"], df["train_len"], strict=True)))
    if not keys:
        raise ValueError("position_loss_plot: no per-position rows (bucket 'pos:…') to plot")
    fig, axes = _grid(len(keys), PAPER_WIDTH / PANEL_COLUMNS, 2.8, ncols=PANEL_COLUMNS)
    all_pairs = series_order(zip(df["encoding"], df["variant"], strict=True))
    for ax, (task, train_len) in zip(axes, keys, strict=True):
        bdf = df[(df["task"] == task) & (df["train_len"] == train_len)]
        ratio = bdf["ratio"].max()
        bdf = bdf[bdf["ratio"] == ratio]
        for encoding, variant in series_order(zip(bdf["encoding"], bdf["variant"], strict=True)):
            sdf = bdf[(bdf["encoding"] == encoding) & (bdf["variant"] == variant)]
            curve = sdf.assign(mid=(sdf["lo"] + sdf["hi"]) / 2 + 1).groupby("mid", sort=True)["value"].mean()
            style = series_style(encoding, variant)
            (line,) = ax.plot(curve.index, curve.to_numpy(), color=style["color"], linewidth=1.4,
                              label=series_label(encoding, variant))
            if style["dashes"]:
                line.set_dashes(style["dashes"])
        ax.axvline(train_len, color="0.25", linestyle="--", linewidth=1.0, zorder=0)
        ax.set_xscale("log", base=2)
        _plain_log_labels(ax.xaxis)
        eval_len = int(bdf["eval_len"].max())
        ax.set(title=f"{task} (train length {train_len}, evaluated at {eval_len} = {ratio_label(ratio)})",
               xlabel="target position in the window (log2)", ylabel="nll (nats) ↓")
        ax.grid(True, which="major", alpha=0.3)
    extra = [Line2D([], [], color="0.25", linestyle="--", linewidth=1.0, label="training length")]
    fig.legend(handles=legend_handles(all_pairs) + extra, loc="center left", bbox_to_anchor=(1.0, 0.5),
               frameon=False, fontsize="small")
    fig.suptitle("lenbench: loss by position at the longest evaluation length (mean over seeds)")
    fig.tight_layout()
    return save_figure(fig, path)


def needle_heatmap(source, path: str | Path) -> Path:
    """Needle-in-a-haystack heatmaps: accuracy by needle depth (rows, shallow at the top) and
    evaluation length (columns), one panel per (task, train length, encoding, variant), the
    task's primary metric averaged over seeds; brighter is better.

    Args:
        source: anything `load_results` takes, holding "depth:…" bucket rows (`evaluate_depth`).
        path: output file (.png or .svg).
    """
    full = load_results(source)
    df = _bucketed(full, "depth")
    panels = []
    for task in task_order(df["task"]):
        tdf = df[df["task"] == task]
        metric = primary_metric(task, whole_length(full[full["task"] == task])["metric"].unique())
        tdf = tdf[tdf["metric"] == metric]
        for train_len in sorted(tdf["train_len"].unique()):
            ldf = tdf[tdf["train_len"] == train_len]
            for encoding, variant in series_order(zip(ldf["encoding"], ldf["variant"], strict=True)):
                panels.append((task, int(train_len), metric, encoding, variant,
                               ldf[(ldf["encoding"] == encoding) & (ldf["variant"] == variant)]))
    if not panels:
        raise ValueError("needle_heatmap: no needle-depth rows (bucket 'depth:…') to plot")
    fig, axes = _grid(len(panels), PAPER_WIDTH / 3, 2.2)
    for ax, (task, train_len, metric, encoding, variant, sdf) in zip(axes, panels, strict=True):
        matrix = sdf.pivot_table(index="bucket", columns="eval_len", values="value", aggfunc="mean").sort_index()
        labels = [b.split(":", 1)[1] for b in matrix.index]
        with _quiet():
            sns.heatmap(matrix, ax=ax, cmap="viridis", vmin=0.0, vmax=1.0, annot=True, fmt=".2f",
                        annot_kws={"fontsize": 6}, cbar=False, linewidths=0.5, linecolor="white",
                        yticklabels=labels)
        ax.set(title=f"{series_label(encoding, variant)} ({task}, L{train_len})", xlabel="evaluation length",
               ylabel=f"needle depth ({metric})")
        ax.tick_params(axis="y", rotation=0, labelsize=7)
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle("lenbench: needle depth × length (brighter is better)")
    fig.tight_layout()
    return save_figure(fig, path)
