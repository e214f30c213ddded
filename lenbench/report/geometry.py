"""Encoding geometry: the data of the position-pattern figures, loaded from the run.

For every registered encoding of a results frame, `encoding_patterns` finds the geometry it was
trained at (d_model, n_heads, encoding parameters: the run's first finished cell of it, else the
suite preset, else the model defaults; `encoding_geometries`), loads its trained weights from the
cell's checkpoint when there is one, builds the encoding and computes its position × channel
matrix (`encoding_matrix`) as a frame: what `lenbench.report.plots.geometry.encoding_heatmap`
draws. Called by `lenbench.report.build`, and only when figures are wanted: the one report module
that builds encodings, runs torch on them and reads checkpoints (through `lenbench.run`'s checkpoint
reader, imported inside the function that needs it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import torch

from lenbench.encodings import ENCODINGS, EncodingDims, PositionalEncoding, build_encoding


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


def encoding_geometries(df: pd.DataFrame, results_dir: str | Path | None = None, *,
                        max_positions: int = 256) -> dict[str, dict]:
    """`encoding_pattern` keyword arguments for every registered encoding of a results frame.

    Geometry (d_model, n_heads, encoding parameters) and trained weights come from the run: the
    first finished cell of the encoding in ``results_dir/cells`` (lm first, the longest context) and
    its checkpoint ``results_dir/checkpoints/<train_id>.pt``; without a run directory, from the
    suite preset named in the rows; else the model defaults (64, 4). Positions: the cell's longest
    evaluated sequence, at most `max_positions`. An encoding with trainable parameters but no
    checkpoint at hand is drawn at initialisation, and its note says so; the note says "trained
    weights" only of an encoding with trainable parameters, and "fixed (nothing trained)" of one
    without (sinusoidal, rope: its pattern is its definition whatever the checkpoint holds).
    """
    from lenbench.report.stats import is_baseline

    names = [e for e in dict.fromkeys(df["encoding"]) if not is_baseline(e) and e in ENCODINGS]  # loads entry points
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
                    from lenbench.run.checkpoint import load_checkpoint_bytes

                    state, _ = load_checkpoint_bytes(checkpoint.read_bytes(), torch.device("cpu"))
                    kwargs["state"] = {k[len("pos_enc."):]: v for k, v in state.items() if k.startswith("pos_enc.")}
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
        if trainable:  # what the encoding's parameters say, not its name: learned, or fixed by its definition
            note += ", trained weights" if "state" in kwargs else ", at initialisation (no checkpoint)"
        else:
            note += ", fixed (nothing trained)"
        kwargs["note"] = note
        out[encoding] = kwargs
    return out


@dataclasses.dataclass(frozen=True)
class EncodingPattern:
    """One encoding's position pattern, ready to draw.

    Attributes:
        encoding: registered encoding name.
        matrix: (positions, channels) float32 values of `encoding_matrix`; ``index.name`` is the
            y-axis label (e.g. "position m"), ``columns.name`` the x-axis label.
        d_model, n_heads: the model geometry the encoding was built for.
        note: where the geometry and weights come from (`encoding_geometries`).
        at_initialisation: the encoding has trainable parameters and no trained weights were
            given: the matrix shows its (seeded) random initialisation, not what was learned.
    """

    encoding: str
    matrix: pd.DataFrame
    d_model: int
    n_heads: int
    note: str = ""
    at_initialisation: bool = False

    @property
    def title(self) -> str:
        return f"{self.encoding} (d_model {self.d_model}, {self.n_heads} heads)"


def encoding_pattern(encoding: str, *, length: int = 256, d_model: int = 128, n_heads: int = 8,
                     state: dict | None = None, note: str = "", **params) -> EncodingPattern:
    """Build an encoding and compute its position matrix (see `encoding_matrix`).

    Args:
        encoding: registered encoding name.
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
    at_initialisation = not state and any(p.requires_grad for p in enc.parameters())
    enc.eval()
    matrix, xlabel, ylabel = encoding_matrix(enc, length)
    frame = pd.DataFrame(matrix.float().numpy())  # (T, channels)
    frame.index.name, frame.columns.name = ylabel, xlabel
    return EncodingPattern(encoding, frame, d_model, n_heads, note, at_initialisation)


def _read_cells(results_dir: str | Path | None) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """One pass over ``results_dir/cells`` (empty without one): encoding name → the plugins its
    finished cells record (`CellResult.plugins`: spec, kind, module, path of each plugin the run had
    loaded), and label → encoding name of the labelled entries the cells' configs record."""
    import json

    plugins: dict[str, list[dict]] = {}
    labels: dict[str, str] = {}
    cells = Path(results_dir) / "cells" if results_dir is not None else None
    if cells is None or not cells.is_dir():
        return plugins, labels
    for path in sorted(cells.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            config = data.get("config") or {}
        except (OSError, ValueError, AttributeError):
            continue
        enc = config.get("encoding")
        if not isinstance(enc, str):
            continue
        if isinstance(config.get("label"), str):
            labels.setdefault(config["label"], enc)
        for plugin in data.get("plugins") or []:
            if isinstance(plugin, dict) and plugin not in plugins.setdefault(enc, []):
                plugins[enc].append(plugin)
    return plugins, labels


def _labelled_entries(df: pd.DataFrame, from_cells: dict[str, str]) -> dict[str, str]:
    """Label → encoding name of the board's labelled entries (e.g. ``fire-relthresh`` → ``fire``): what
    the finished cells' configs record (`from_cells`), else what the rows' preset suites declare. A
    label is not an encoding of its own, so no plugin is missing for it."""
    out = dict(from_cells)
    try:
        from lenbench.config import list_suites, load_suite

        for name in sorted(set(df["suite"].dropna()) & set(list_suites())):
            for spec in load_suite(name).encodings:
                if spec.label:
                    out.setdefault(spec.label, spec.name)
    except Exception:  # noqa: BLE001 - a preset that no longer loads: the cells' labels only
        pass
    return out


def _importable(module: object) -> bool:
    """Whether `module` names a module this environment can import (an installed package), found
    without importing it."""
    import importlib.util

    if not isinstance(module, str) or not module:
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def unregistered_encodings(df: pd.DataFrame, results_dir: str | Path | None = None) -> dict[str, str]:
    """Encodings of the rows that no plugin of this process registers, each with why its position
    pattern cannot be drawn and how to get it; loads on the way the module plugins the run's cells
    record (`_read_cells`) that this environment can import, as entry points are loaded on
    demand, so their encodings are drawn. A file plugin is never loaded from what a results directory
    says (that would run code named by data): its figure needs ``--plugin`` (docs/DESIGN.md, Plugins).

    Returns:
        encoding name → one line: what is missing and the ``--plugin`` that draws it.
    """
    from lenbench.plugins import PluginError, load_plugins
    from lenbench.report.stats import is_baseline

    recorded, cell_labels = _read_cells(results_dir)
    labelled = _labelled_entries(df, cell_labels)
    missing = [e for e in dict.fromkeys(df["encoding"]) if isinstance(e, str) and not is_baseline(e)
               and e not in ENCODINGS  # `in` loads an entry point of that name
               and not (e in labelled and labelled[e] in ENCODINGS)]  # a label of a registered encoding
    if not missing:
        return {}
    out = {}
    for encoding in missing:
        plugins = recorded.get(encoding, [])
        for plugin in plugins:
            if plugin.get("kind") == "module" and _importable(plugin.get("module")):
                try:
                    load_plugins([plugin["module"]])
                except PluginError:
                    continue
        if encoding in ENCODINGS:
            continue
        specs = [str(p.get("path") or p.get("module") or p.get("spec")) for p in plugins]
        where = (f"its run loaded the plugin(s) {', '.join(specs)}, not loaded here" if specs
                 else "no plugin loaded here registers it")
        again = " ".join(f"--plugin {s}" for s in specs) if specs else "--plugin MODULE_OR_PATH (the plugin that defines it)"
        out[encoding] = f"encoding {encoding!r} is not registered ({where}); rerun the report with {again}"
    return out


def encoding_patterns(df: pd.DataFrame, results_dir: str | Path | None = None, *,
                      max_positions: int = 256) -> dict[str, EncodingPattern]:
    """`encoding_pattern` of every registered encoding of a results frame at the run's geometry
    (`encoding_geometries`), in registry order; an encoding that cannot be drawn this way (e.g. a
    contextual one without a position matrix of its own) is left out."""
    geometries = encoding_geometries(df, results_dir, max_positions=max_positions)
    out = {}
    for encoding in [e for e in ENCODINGS.names() if e in geometries]:
        try:
            out[encoding] = encoding_pattern(encoding, **geometries[encoding])
        except Exception:  # noqa: BLE001 - not drawable: no figure
            continue
    return out
