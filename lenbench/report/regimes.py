"""Where each paper's method ran outside its designed regime on this board, read off the board's own cells.

A claim (`lenbench.report.claims.Claim`) names the facts of its regime (``regime=("rope", "prope")``);
this module states each fact in one clause from what the board's cells trained: each entry's encoding is
built from its cell's canonical config as the cell built it (`lenbench.run.cell.config_model`, untrained),
and the clause reads the numbers off it (RoPE's head dimension, ALiBi's slopes, Sandwich's compression,
FIRE's threshold, xPos's scale base, the range Randomized PE draws from, p-RoPE's dropped pairs, YaRN's
ramp, a NoPE/RoPE hybrid's NoPE layers and local span). A board of another geometry, or a suite that sets
a length-relative parameter, gets clauses true of it, not of the catalog.

The cells' configs come from the results directory's ``cells/`` (a benchmark JSON's own directory
counts), else from the presets the rows name, each cell only where its id is one of the rows' (an id
hashes the config, so a preset that has since changed contributes nothing stale). An entry whose config
is not at hand, or whose encoding this process does not register, gets no clause. Like
`lenbench.report.geometry`, this is one of the two report modules that build encodings (torch); only the
report's build imports it, inside a function.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from lenbench.encodings import ENCODINGS, PositionalEncoding, build_encoding


@dataclasses.dataclass(frozen=True)
class Entry:
    """One trained entry of one board as its cells built it.

    Attributes:
        encoding: the encoding, untrained, at the cell's geometry (`EncodingDims`: head_dim, train_len
            and max_len in tokens).
        config: the cell's canonical config (`lenbench.config.Cell.config`).
        unit: the task's `length_unit` ("items", "digits", "tokens").
    """

    encoding: PositionalEncoding
    config: dict
    unit: str


#: One board of a claim: (task, train_len, {series of the claim: its `Entry`}).
Board = tuple[str, int, dict[str, Entry]]


def cell_configs(df: pd.DataFrame, cells_dir: str | Path | None) -> dict[str, dict]:
    """cell id → canonical config of every cell of the rows whose config is at hand (module docstring)."""
    ids = set(df["cell_id"].dropna().astype(str)) - {""}
    out: dict[str, dict] = {}
    if cells_dir is not None and Path(cells_dir).is_dir():
        for path in sorted(Path(cells_dir).glob("*.json")):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("cell_id") in ids and isinstance(data.get("config"), dict):
                out[data["cell_id"]] = data["config"]
    try:
        from lenbench.config import list_suites, load_suite

        for name in sorted(set(df["suite"].dropna()) & set(list_suites())):
            for cell in load_suite(name).cells():
                if cell.cell_id in ids:
                    out.setdefault(cell.cell_id, cell.config())
    except Exception:  # noqa: BLE001 - a preset that no longer loads: the cells' configs only
        pass
    return out


def board_entries(df: pd.DataFrame, configs: dict[str, dict],
                  keys: set[tuple[str, int, str]]) -> dict[tuple[str, int, str], Entry]:
    """(task, train_len, encoding label) → its `Entry`, for each of `keys` whose config is in `configs`
    (`cell_configs`) and whose encoding this process registers."""
    from lenbench.run.cell import config_model
    from lenbench.tasks import build_task

    out = {}
    for (task, train_len, label), ids in df.groupby(["task", "train_len", "encoding"])["cell_id"]:
        key = (str(task), int(train_len), str(label))
        config = next((configs[i] for i in dict.fromkeys(ids.astype(str)) if i in configs), None)
        if key not in keys or config is None or config.get("encoding") not in ENCODINGS:
            continue
        try:
            built = build_task(config["task"], **dict(config.get("task_params") or {}))
            model = config_model(config, built)
            enc = build_encoding(model.encoding, model.dims(), **model.encoding_params)
        except Exception:  # noqa: BLE001 - a config this code no longer builds: no clause
            continue
        out[key] = Entry(enc, config, built.length_unit)
    return out


def _lengths(boards: list[Board]) -> str:
    """The boards' training lengths with their unit: "a 64-token training length", "training lengths
    of 3–8" (units named only when they agree)."""
    lengths = sorted({tl for _, tl, entries in boards if entries})
    units = {e.unit for _, _, entries in boards for e in entries.values()}
    if len(lengths) == 1:
        unit = units.pop().removesuffix("s") if len(units) == 1 else "position"
        return f"a {lengths[0]}-{unit} training length"
    return f"training lengths of {lengths[0]}–{lengths[-1]}" + (f" {units.pop()}" if len(units) == 1 else "")


def _each(boards: list[Board], series: str) -> list[Entry]:
    return [entries[series] for _, _, entries in boards if series in entries]


def _rope(a: str, boards: list[Board]) -> str:
    dims = sorted({e.encoding.dims.head_dim for _, _, entries in boards for e in entries.values()})
    return "; ".join(f"RoPE at head_dim {d} has {d // 2} frequency pairs" for d in dims)


def _alibi(a: str, boards: list[Board]) -> str:
    """ALiBi's slopes, which its head count sets (2^(-8i/n), Press et al. 2022, section 3): the paper's
    8 heads span 1/2 to 1/256; 2 heads have only 1/16 and 1/256 (studies/protocol/README.md measures
    what that costs ALiBi). ALiBi is the claim's A or one of its Bs."""
    return "; ".join(dict.fromkeys(
        _per_head("ALiBi", [_fraction(float(v)) for v in e.encoding.slopes], "has the slope", "s",
                  "1/2 to 1/256") for e in _each(boards, "alibi")))


def _sandwich(a: str, boards: list[Board]) -> str:
    """Sandwich's per-head compression 8h/H (Chi et al. 2023), which its head count sets: the paper's 8
    heads divide by 1 to 8; 2 heads by 4 and 8 only (no head keeps the full bias)."""
    from lenbench.encodings.sandwich import sandwich_head_divisors

    return "; ".join(dict.fromkeys(
        _per_head("Sandwich", [f"{float(v):g}" for v in sandwich_head_divisors(e.encoding.dims.n_heads)],
                  "divides its bias by", "", "1 to 8") for e in _each(boards, a)))


def _per_head(name: str, values: list[str], verb: str, plural: str, paper: str) -> str:
    """One clause of a method whose per-head strengths its head count sets: "ALiBi at 2 heads has the
    slopes 1/16 and 1/256 (its paper's 8 heads: 1/2 to 1/256)"; `plural` is added to `verb` when there
    are several heads."""
    n = len(values)
    listed = ", ".join(values[:-1]) + f" and {values[-1]}" if n > 1 else values[0]
    return f"{name} at {n} head{'s' * (n != 1)} {verb}{plural * (n != 1)} {listed} (its paper's 8 heads: {paper})"


def _fraction(value: float) -> str:
    """A slope as 1/2^k writes it ("1/16"), else as a number."""
    inverse = 1.0 / value
    return f"1/{round(inverse)}" if math.isclose(inverse, round(inverse), rel_tol=1e-6) else f"{value:g}"


def _fire(a: str, boards: list[Board]) -> str:
    values = sorted({float(e.encoding.threshold_init) for e in _each(boards, a)})
    return "" if not values else f"FIRE's threshold is {_numbers(values)} positions against {_lengths(boards)}"


def _xpos(a: str, boards: list[Board]) -> str:
    values = sorted({float(e.encoding.scale_base) for e in _each(boards, a)})
    return "" if not values else f"xPos's scale base is {_numbers(values)} positions against {_lengths(boards)}"


def _randomized(a: str, boards: list[Board]) -> str:
    values = sorted({float(e.encoding.max_position) for e in _each(boards, a)})
    return "" if not values else f"positions are drawn from L = {_numbers(values)} for {_lengths(boards)}"


def _prope(a: str, boards: list[Board]) -> str:
    from lenbench.encodings.rope_types import default_inv_freq

    out = []
    for e in _each(boards, a):
        enc = e.encoding
        dropped = default_inv_freq(enc.dims.head_dim, enc.theta)[enc.kept:]  # (pairs − kept,) radians per position
        if len(dropped):
            n, tokens = len(dropped), enc.dims.train_len
            out.append(f"its {_count(n)} dropped pair{'s' * (n != 1)} turn at most "
                       f"{float(dropped.max()) * tokens:.3f} rad over {tokens} positions")
    return "; ".join(dict.fromkeys(out))


def _yarn(a: str, boards: list[Board]) -> str:
    """How many of RoPE's pairs YaRN keeps, ramps and interpolates at the training length: lenbench's
    own YaRN frequencies (the variant's scaling dict at ratio 4, `scaling_for`) against RoPE's (which pairs fall where depends on the training length
    and YaRN's β's, not on the factor)."""
    from lenbench.config.schema import VariantSpec
    from lenbench.encodings.rope_scaling import rope_parameters, scaling_for

    out = []
    for e in _each(boards, a):
        enc, variant = e.encoding, next((v for v in e.config.get("variants", ()) if v.get("rope_type") == "yarn"), None)
        if variant is None or not hasattr(enc, "rot_dim"):
            continue
        scaling = scaling_for(VariantSpec(**variant), 4.0, enc.dims.train_len)  # as evaluation builds it, at 4x
        plain, _ = rope_parameters(None, enc.rot_dim, enc.theta, None)
        yarn, _ = rope_parameters(scaling, enc.rot_dim, enc.theta, None)
        ratio = (yarn / plain).tolist()  # 1: kept, 1 / factor: interpolated, between: on the ramp
        kept = sum(math.isclose(r, 1.0) for r in ratio)
        divided = sum(math.isclose(r, 1.0 / float(scaling["factor"])) for r in ratio)
        out.append(f"YaRN keeps {kept}, ramps {len(ratio) - kept - divided} and interpolates {divided} of them "
                   f"at {enc.dims.train_len} tokens")
    return "; ".join(dict.fromkeys(out))


def _hybrid(a: str, boards: list[Board]) -> str:
    """A NoPE/RoPE hybrid's layer schedule and local span (Llama 4's ``(layer + 1) % interval == 0``):
    how many of the model's layers are NoPE-global, and the window or chunk its RoPE layers attend over
    on each board, against the training length (Llama 4 Scout and RNoPE-SWA: one NoPE layer in 4,
    their local spans shorter than their training contexts)."""
    heads, spans = [], []
    for task, train_len, entries in boards:
        if a not in entries:
            continue
        enc, unit = entries[a].encoding, entries[a].unit
        layers = enc.dims.n_layers
        nope = sum(enc.is_nope(layer) for layer in range(layers))
        rest = "the other" if layers - nope == 1 else "the others"
        heads.append(f"{_count(nope)} of its {_count(layers)} layers {'is' if nope == 1 else 'are'} NoPE-global, "
                     f"{rest} RoPE over a {'sliding window' if enc.local == 'sliding' else 'chunk'} of")
        spans.append(f"{enc.window} of the {train_len} training {unit} on {task}" if not spans else
                     f"{enc.window} of {train_len} on {task}")
    if not heads:
        return ""
    return (" / ".join(dict.fromkeys(heads)) + " " + ", ".join(spans)
            + " (Llama 4 and RNoPE-SWA: one NoPE layer in 4)")


def _numbers(values: list[float]) -> str:
    return " / ".join(f"{v:g}" for v in values)


def _count(n: int) -> str:
    return ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")[n] if n < 10 else str(n)


#: Each regime fact: (the claim's entry A, its boards) → one clause ("" when the boards lack it).
FACTS: dict[str, Callable[[str, list[Board]], str]] = {
    "rope": _rope, "alibi": _alibi, "sandwich": _sandwich, "fire": _fire, "xpos": _xpos, "randomized": _randomized,
    "prope": _prope, "yarn": _yarn, "hybrid": _hybrid}


def regime_writer(df: pd.DataFrame, cells_dir: str | Path | None) -> Callable[[object, list[tuple[str, int, dict]]], str]:
    """The function `lenbench.report.claims.claims_markdown` states each claim's regime with: (claim, its
    boards as (task, train_len, {series: encoding label})) → the claim's facts (`Claim.regime`) joined by
    "; ", each read off this board's cells ("" where none is at hand). The cells are read on the first
    call, and only the entries a call names are built."""
    entries: dict[tuple[str, int, str], Entry] = {}
    configs = functools.cache(lambda: cell_configs(df, cells_dir))

    def write(claim, boards: list[tuple[str, int, dict]]) -> str:
        missing = {(task, tl, label) for task, tl, labels in boards for label in labels.values()} - set(entries)
        if missing:
            entries.update(board_entries(df, configs(), missing))
        built = [(task, tl, {s: entries[(task, tl, label)] for s, label in labels.items()
                             if (task, tl, label) in entries}) for task, tl, labels in boards]
        clauses = [FACTS[fact](claim.a, built) for fact in claim.regime]
        return "; ".join(c for c in clauses if c)

    return write
