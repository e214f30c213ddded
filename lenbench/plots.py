"""Figures: metric against length, the leaderboard heatmap and the position-encoding heatmap.

Every figure is written with the non-interactive Agg backend, so plotting works on machines
without a display, in the format the path's suffix names (PNG or SVG), atomically (temporary
file + os.replace) and reproducibly (no date in SVGs, fixed SVG ids).

Every figure shares one style per line: the colour comes from the encoding's index in the
encoding registry (`ENCODING_COLORS`, 20 fixed colours; a label outside the registry gets a
colour from a hash of its name), the dash pattern from the variant's rope_type index in the
rope_type registry (solid for the plain encoding), the marker says whether the variant was
fine-tuned; lines and legends follow `lenbench.results.series_order`. Adding results never
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

from lenbench.atomic import atomic_path  # noqa: E402
from lenbench.encodings import ENCODINGS, EncodingDims, PositionalEncoding, build_encoding  # noqa: E402
from lenbench.results import (  # noqa: E402
    BASE_VARIANT,
    Leaderboard,
    leaderboard,
    load_results,
    primary_metric,
    ratio_label,
    series_label,
    series_order,
    task_order,
    variant_rope_type,
    whole_length,
)

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


def encoding_matrix(enc: PositionalEncoding, length: int) -> tuple[torch.Tensor, str]:
    """The position × channel matrix an encoding applies, and a label for its channel axis.

    - absolute encodings: `embed(0, pos)`, the vector added at each position (T, D);
    - rotary encodings: a ones query rotated to each position (T, Dh);
    - bias encodings: the bias from the last query to each key, per head (T, H).
    """
    d = enc.dims
    pos = torch.arange(length)[None]  # (1, T)
    with torch.no_grad():
        emb = enc.embed(torch.zeros(1, length, d.d_model), pos)[0]  # (T, D)
        if emb.abs().sum() > 0:
            return emb, "embedding dimension"
        ones = torch.ones(1, 1, length, d.head_dim)  # (1, 1, T, Dh)
        q, _ = enc.rotate(ones, ones, pos)
        if not torch.equal(q, ones):
            return q[0, 0], "head dimension"
        bias = enc.bias(pos, pos)  # (1, H, T, T) or None
        if bias is not None:
            return bias[0, :, -1, :].T, "head"  # (T, H)
    return torch.zeros(length, d.d_model), "embedding dimension"


def encoding_heatmap(
    encoding: str, path: str | Path, *, length: int = 256, d_model: int = 128, n_heads: int = 8, **params
) -> Path:
    """Render an encoding's position × dimension matrix (see `encoding_matrix`) to PNG or SVG.

    For `sinusoidal` this is the classic striped picture: fast oscillation in the first dimensions,
    slow waves in the last.

    Args:
        encoding: registered encoding name.
        path: output file; the suffix (.png, .svg) chooses the format.
        length: number of positions (rows).
        d_model, n_heads: model geometry the encoding is built for.
        params: encoding parameters.
    """
    with torch.random.fork_rng(devices=[]):  # trainable encodings start from a fixed init: same picture every run
        torch.manual_seed(0)
        enc = build_encoding(encoding, EncodingDims(d_model=d_model, n_heads=n_heads, max_len=max(length, 1)), **params)
    enc.eval()
    matrix, xlabel = encoding_matrix(enc, length)
    fig, ax = plt.subplots(figsize=(7, 5))
    # rasterized: one image instead of T × D vector patches, so the SVG stays small.
    with _quiet():
        sns.heatmap(matrix.float().numpy(), ax=ax, cmap="RdBu_r", center=0, xticklabels=False, yticklabels=False,
                    rasterized=True)
    ax.set(xlabel=xlabel, ylabel="position", title=f"{encoding}: position × {xlabel}")
    return save_figure(fig, path)


def has_fixed_pattern(encoding: str, *, length: int = 256, d_model: int = 128, n_heads: int = 8) -> bool:
    """Whether an encoding's position matrix is fixed by its definition: no trainable parameters
    (a learned table or bias would only show its random initialisation) and not all zeros (NoPE)."""
    try:
        enc = build_encoding(encoding, EncodingDims(d_model=d_model, n_heads=n_heads, max_len=length))
        if any(p.requires_grad for p in enc.parameters()):
            return False
        matrix, _ = encoding_matrix(enc.eval(), length)
        return bool(matrix.abs().sum() > 0)
    except Exception:  # an encoding that cannot be drawn this way (e.g. contextual)
        return False


def safe_encoding_heatmap(encoding: str, path: str | Path, **kwargs) -> Path | None:
    """`encoding_heatmap`, or None (with nothing written) when the encoding cannot be drawn."""
    try:
        return encoding_heatmap(encoding, path, **kwargs)
    except Exception:  # an encoding without a position matrix of its own (e.g. contextual) is skipped
        plt.close("all")
        return None


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


def series_style(encoding: str, variant: str) -> dict:
    """Colour, dashes and marker of the line of (encoding, variant) in every figure."""
    return {"color": encoding_color(encoding), "dashes": variant_dashes(variant), "marker": variant_marker(variant)}


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


def _grid(n: int, width: float, height: float):
    ncols = min(3, max(1, n))
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
    with its 95 % hierarchical bootstrap band (`lenbench.stats`); a model that did not learn the
    task at 1× (`not_learned`) is drawn faded. Baselines (``baseline:<name>`` rows: chance,
    repeat-previous, unigram) are grey lines without markers; results without baseline rows get
    a dotted chance line for token accuracy. × marks at the bottom where every seed failed;
    perplexity on a log y axis.

    Args:
        source: anything `load_results` takes (a tidy frame, a results directory, CSV or benchmark JSON).
        path: output file; the suffix (.png, .svg) chooses the format.
        board: the precomputed `leaderboard(source)`, if at hand.
    """
    from lenbench.stats import is_baseline

    df = load_results(source)
    boards = _boards(df)
    if not boards:
        raise ValueError("extrapolation_plot: no rows to plot")
    board = board if board is not None else leaderboard(df)
    fig, axes = _grid(len(boards), 5.0, 3.8)
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
        if metric == "perplexity" and len(values) and (values > 0).all() and values.max() / values.min() > 10:
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
    fig.legend(handles=legend_handles(all_pairs) + extra, loc="center left", bbox_to_anchor=(1.0, 0.5),
               frameon=False, fontsize="small")
    seeds = df["seed"].nunique()
    fig.suptitle(f"lenbench: {metric_summary(boards)} against evaluation length "
                 f"({seeds} seed{'s' if seeds != 1 else ''}, mean and 95 % bootstrap interval)")
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
        elif metric == "perplexity" and len(finite) and (finite > 0).all() and finite.max() / finite.min() > 10:
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
    fig, axes = _grid(len(keys), 5.5, 4.0)
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
    fig, axes = _grid(len(panels), 3.6, 2.8)
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
