"""Helpers shared by several test modules (tests/ is on sys.path under pytest's default import mode)."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import sys
from pathlib import Path

import torch

from lenbench.atomic import atomic_write_json

#: The catalog under issue 42's protocol (relative FIRE, xPos and randomized PE, the authors' values
#: labelled): the `catalog` preset from its republication on, when this becomes `load_suite("catalog")`'s path.
CATALOG_DRAFT = Path(__file__).resolve().parents[1] / "studies" / "protocol" / "presets" / "catalog.yaml"

#: A suite that trains in a second or two: the engine tests' common ground (copy, nope and rope, PI).
TINY_SUITE = {
    "name": "tiny",
    "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "ff_mult": 2},
    "train": {"steps": 6, "batch_size": 4, "lr": 0.003, "warmup": 2},
    "eval": {"ratios": [1, 2], "samples": 4},
    "tasks": [{"name": "copy", "train_len": 4}],
    "encodings": ["nope", "rope"],
    "variants": ["linear"],
}


#: TINY_SUITE's geometry without variants, 3 steps: the run `tiny_run` (tests/conftest.py) trains once
#: per session for the tests that only read a finished run (2 cells).
TINY_RUN = {**{k: v for k, v in TINY_SUITE.items() if k != "variants"},
            "train": {**TINY_SUITE["train"], "steps": 3, "warmup": 1}}


def load_script(path: Path, name: str | None = None):
    """Import a script that is not in a package (a study, a bench or workflow tool) by its path, registered
    in `sys.modules` under `name` (default: the file's stem) so that its dataclasses and pickles resolve."""
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def pid_running(pid: int) -> bool:
    """Whether process `pid` runs, read from /proc (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def write_dedented(path: Path, text: str) -> Path:
    """Write `text`, dedented, to `path` (parents made); returns `path`."""
    import textwrap

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def suite_load_error(path) -> str:
    """The one-line `SuiteError` loading suite `path` raises (asserted to be one line)."""
    import pytest

    from lenbench.config import SuiteError, load_suite

    with pytest.raises(SuiteError) as err:
        load_suite(path)
    text = str(err.value)
    assert "\n" not in text
    return text


def write_suite(tmp_path: Path, data: dict, name: str = "tiny.yaml") -> Path:
    """Write a suite mapping as YAML into `tmp_path` and return the file's path."""
    import yaml

    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


#: The fields of a measurement that two runs of the same cells must agree on (`metric_rows`).
METRIC_KEYS = ("cell_id", "task", "encoding", "variant", "train_len", "eval_len", "ratio", "metric", "value",
               "n_samples", "seed", "status")


def metric_rows(out: Path) -> list[tuple]:
    """The measurements of the cell files in ``out/cells``, sorted, as strings of `METRIC_KEYS`."""
    from lenbench.run.store import load_rows

    return sorted(tuple(str(r[k]) for k in METRIC_KEYS) for r in load_rows(out))


def write_cells(directory: Path, rows: list[dict]) -> Path:
    """Write `rows` as a results directory: one `cells/<cell_id>.json` per cell, as the engine does."""
    by_cell: dict[str, list[dict]] = {}
    for r in rows:
        by_cell.setdefault(r["cell_id"], []).append(r)
    for cell_id, cell_rows in by_cell.items():
        atomic_write_json(directory / "cells" / f"{cell_id}.json",
                          {"schema_version": 1, "cell_id": cell_id, "status": "ok", "error": "", "rows": cell_rows})
    return directory


def assert_scores_depend_on_distance_only(enc, heads: int, head_dim: int, pairs, atol: float) -> None:
    """q_m · k_n after `enc.rotate` equals q_3 · k_0 for every (m, n) in `pairs` with m − n = 3,
    and differs at another distance: the rotary invariant."""
    q = torch.randn(1, heads, 1, head_dim, dtype=torch.float64)
    k = torch.randn(1, heads, 1, head_dim, dtype=torch.float64)

    def score(m: int, n: int) -> torch.Tensor:
        qm, _ = enc.rotate(q, q, torch.tensor([[m]]))
        _, kn = enc.rotate(k, k, torch.tensor([[n]]))
        return (qm * kn).sum(-1)  # (1, heads, 1)

    for m, n in pairs:
        assert m - n == 3
        torch.testing.assert_close(score(m, n), score(3, 0), atol=atol, rtol=0)
    assert not torch.allclose(score(5, 2), score(5, 3))



def assert_causal(m, vocab: int) -> None:
    """Changing tokens 8 … 11 of a 12-token batch leaves the outputs at 0 … 7 exactly as they were
    and changes the later ones: no position sees its future."""
    tokens = torch.randint(0, vocab, (2, 12))
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % vocab
    with torch.no_grad():
        torch.testing.assert_close(m(changed)[:, :8], m(tokens)[:, :8], atol=1e-12, rtol=0)
        assert (m(changed)[:, 8:] - m(tokens)[:, 8:]).abs().max() > 1e-8


def assert_right_padding_is_invisible(m, tokens: torch.Tensor) -> None:
    """Five padding tokens appended under the pad mask leave the real tokens' outputs unchanged.

    Args:
        tokens: (B, T) token ids.
    """
    b, t = tokens.shape
    padded = torch.cat((tokens, torch.zeros(b, 5, dtype=torch.long)), dim=1)
    pad_mask = (torch.arange(t + 5) < t)[None].expand(b, -1)
    with torch.no_grad():
        torch.testing.assert_close(m(padded, pad_mask=pad_mask)[:, :t], m(tokens), atol=1e-10, rtol=0)


def float64_model(name: str, params: dict | None = None, *, vocab: int, d_model: int, n_heads: int,
                  n_layers: int, seed: int = 0, train_len: int | None = None):
    """A seeded float64 Transformer (ff_mult 2, max_len 64) with encoding `name`, in eval mode: the
    subject that the float64 loops of the encodings' papers are compared against."""
    from lenbench.model import ModelConfig, Transformer

    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=vocab, d_model=d_model, n_layers=n_layers, n_heads=n_heads, ff_mult=2,
                      encoding=name, encoding_params=params or {}, max_len=64, train_len=train_len)
    return Transformer(cfg).double().eval()


def attention_io(m, tokens: torch.Tensor, layer: int, pos: torch.Tensor | None = None):
    """The input x (B, T, D) of layer `layer`'s attention and its output (B, T, D), via a forward hook."""
    seen = {}
    h = m.blocks[layer].attn.register_forward_hook(
        lambda mod, args, out: seen.update(x=args[0].detach(), y=out.detach()))
    with torch.no_grad():
        m(tokens, pos)
    h.remove()
    return seen["x"], seen["y"]


def split_qkv(attn, x: torch.Tensor, n_heads: int):
    """q, k, v (B, H, T, Dh) each, in float64, from the attention's fused qkv weight and its input x (B, T, D)."""
    q, k, v = (x.double() @ attn.qkv.weight.double().T).chunk(3, dim=-1)
    split = lambda t: t.view(t.shape[0], t.shape[1], n_heads, -1).permute(0, 2, 1, 3)  # noqa: E731
    return split(q), split(k), split(v)


def softmax_rows(logits: list[list[float]]) -> list[list[float]]:
    """Row-wise softmax of nested floats, −inf entries weighted 0."""
    out = []
    for row in logits:
        mx = max(z for z in row if z != -math.inf)
        e = [math.exp(z - mx) if z != -math.inf else 0.0 for z in row]
        total = sum(e)
        out.append([w / total for w in e])
    return out


def attend(attn, weights, v: torch.Tensor, extra=None) -> torch.Tensor:
    """Σ_j w[b][h][i][j] v_j (+ extra[b][h][i] · v_i), heads merged and projected by attn.out.

    Args:
        weights: nested floats [b][h][i][j]; extra: nested floats [b][h][i] or None.
        v: (B, H, T, Dh) float64.
    Returns: (B, T, D).
    """
    B, H, n, dh = v.shape
    y = torch.zeros(B, H, n, dh, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(n):
                for j in range(n):
                    y[b, h, i] += weights[b][h][i][j] * v[b, h, j]
                if extra is not None:
                    y[b, h, i] += extra[b][h][i] * v[b, h, i]
    return y.transpose(1, 2).reshape(B, n, H * dh) @ attn.out.weight.double().T


def run_tiny_suite_checked(suite: dict, out: Path) -> tuple[set[tuple[str, str, str]], list[Path]]:
    """Run `suite` serially into `out` and check what every tiny encoding suite must show: no failed
    row (a failure names its reason), every entry evaluated at every ratio of the suite, every value
    finite, and every trained model's final loss below the uniform guess's log V.

    Returns:
        the (encoding, variant, task) entries with rows, and the checkpoint files.
    """
    import math

    from lenbench.config import parse_suite
    from lenbench.run.checkpoint import load_checkpoint_bytes
    from lenbench.run.driver import run_suite
    from lenbench.run.store import CHECKPOINTS, load_rows

    run_suite(parse_suite(suite), out, device="cpu", executor="serial", progress=False, log=lambda _: None)
    rows = [r for r in load_rows(out) if not str(r["encoding"]).startswith("baseline")]
    failed = [(r["encoding"], r["variant"], r["task"], r["eval_len"], r.get("error")) for r in rows if r["status"] != "ok"]
    assert not failed, failed
    entries = {(r["encoding"], r["variant"], r["task"]) for r in rows}
    ratios = {(r["encoding"], r["variant"], r["task"], r["ratio"]) for r in rows}
    want = set(suite["eval"]["ratios"])
    assert all({x for (e, v, t, x) in ratios if (e, v, t) == entry} == want for entry in entries), sorted(ratios)
    assert all(math.isfinite(r["value"]) for r in rows)
    checkpoints = sorted((out / CHECKPOINTS).glob("*.pt"))
    for path in checkpoints:
        state, meta = load_checkpoint_bytes(path.read_bytes(), torch.device("cpu"))
        assert math.isfinite(meta["final_loss"]) and meta["final_loss"] < math.log(state["head.weight"].shape[0]), \
            (path.name, meta["final_loss"])
    return entries, checkpoints

# --- plugins from outside the package (tests/test_plugins.py, tests/run/test_plugins_e2e.py, test_ray.py) ---

#: An encoding plugin (an ALiBi subclass with steeper slopes) and a task plugin (the running maximum),
#: as a user would write them in their own directory; `{scale}` is what an edit changes.
PLUGIN_ENCODING = '''
from lenbench.encodings import register_encoding
from lenbench.encodings.alibi import ALiBi, alibi_slopes


@register_encoding("{name}")
class Steep(ALiBi):
    description = "ALiBi with steeper slopes (a test plugin)"

    def __init__(self, dims, *, scale: float = {scale}):
        super().__init__(dims)
        self.register_buffer("slopes", scale * alibi_slopes(dims.n_heads).float(), persistent=False)
'''
PLUGIN_TASK = '''
import torch

from lenbench.tasks import Batch, Task, register_task


@register_task("{name}")
class RunningMax(Task):
    description = "the running maximum of a digit string (a test plugin)"
    length_unit = "digits"

    def __init__(self, vocab: int = {vocab}):
        self.vocab = vocab

    @property
    def vocab_size(self):
        return self.vocab

    def seq_len(self, length):
        return length

    def sample(self, batch_size, length, generator, split="train"):
        digits = torch.randint(0, self.vocab, (batch_size, length), generator=generator)  # (B, T)
        return Batch(inputs=digits, targets=digits.cummax(dim=1).values, loss_mask=torch.ones_like(digits, dtype=torch.bool))
'''

#: A suite of the two plugins next to a built-in encoding and task; its cells learn running-max in
#: about two seconds each (copy stays "not learned" at this budget, which the board must say).
PLUGIN_SUITE = {
    "name": "plugins",
    "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "ff_mult": 2},
    "train": {"steps": 80, "batch_size": 16, "lr": 0.01, "warmup": 4},
    "eval": {"ratios": [1, 2], "samples": 8},
    "tasks": [{"name": "running-max", "train_len": 8}, {"name": "copy", "train_len": 4}],
    "encodings": ["nope", "alibi-steep"],
    "kernels": {"lengths": [64], "dtypes": ["fp32"], "seconds": 0.02, "train_rounds": 3,
                "encodings": ["alibi-steep"]},
}


def write_plugins(directory: Path, *, encoding: str = "alibi-steep", task: str = "running-max",
                  scale: float = 2.0, vocab: int = 10) -> tuple[Path, Path]:
    """Write the encoding plugin (steep.py) and the task plugin (runmax.py) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    enc = directory / "steep.py"
    enc.write_text(PLUGIN_ENCODING.format(name=encoding, scale=scale))
    task_file = directory / "runmax.py"
    task_file.write_text(PLUGIN_TASK.format(name=task, vocab=vocab))
    return enc, task_file


def write_plugin_distribution(site: Path) -> Path:
    """An installed distribution in `site` (a sys.path / PYTHONPATH directory) whose entry points
    declare `ep-steep` (lenbench.encodings) and `ep-running-max` (lenbench.tasks)."""
    package = site / "steep_dist"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "enc.py").write_text(PLUGIN_ENCODING.format(name="ep-steep", scale=2.0))
    (package / "task.py").write_text(PLUGIN_TASK.format(name="ep-running-max", vocab=10))
    info = site / "steep_dist-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: steep-dist\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[lenbench.encodings]\nep-steep = steep_dist.enc:Steep\n\n"
                                           "[lenbench.tasks]\nep-running-max = steep_dist.task:RunningMax\n")
    return site


@contextlib.contextmanager
def plugin_sandbox(fresh: bool = False):
    """Registries, loaded plugins and imported modules as they were before, afterwards (a test that
    loads plugins in its own process leaves no name behind for the next); with `fresh`, no plugin
    is loaded during it but its own (an earlier test module's must not change what errors say)."""
    import sys

    from lenbench import plugins
    from lenbench.encodings import ENCODINGS
    from lenbench.tasks import TASKS

    saved = [(r, dict(r._items), dict(r._origins)) for r in (ENCODINGS, TASKS)]
    loaded, failed, modules = dict(plugins._LOADED), dict(plugins._FAILED), set(sys.modules)
    changes = dict(plugins._CHANGES)
    if fresh:
        plugins._LOADED.clear()
        plugins._FAILED.clear()
        plugins._CHANGES.clear()
    try:
        yield
    finally:
        for registry, items, origins in saved:
            registry._items.clear()
            registry._items.update(items)
            registry._origins.clear()
            registry._origins.update(origins)
        plugins._LOADED.clear()
        plugins._LOADED.update(loaded)
        plugins._FAILED.clear()
        plugins._FAILED.update(failed)
        plugins._CHANGES.clear()
        plugins._CHANGES.update(changes)
        for name in set(sys.modules) - modules:  # the plugins' own modules, not libraries imported meanwhile
            if _is_plugin_module(sys.modules[name]):
                del sys.modules[name]
        plugins._entry_points.cache_clear()


def _is_plugin_module(module) -> bool:
    """A module loaded from a test's plugin (a file plugin, or a package in a temporary directory)."""
    import sys

    from lenbench.plugins import FILE_MODULE_PREFIX

    if module.__name__.startswith(FILE_MODULE_PREFIX):
        return True
    file = getattr(module, "__file__", None)
    if not file:
        return False
    path = Path(file).resolve()
    installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, Path(__file__).resolve().parents[1])}
    return not any(path.is_relative_to(root) for root in installed)


def default_sigint() -> None:
    """A `preexec_fn` for a child a test interrupts with SIGINT: the default disposition, as an
    interactive terminal gives it. A command started in the background of a non-interactive shell
    (`cmd &`, as CI wrappers may start the tests) inherits SIGINT *ignored*, and Python then never
    raises KeyboardInterrupt: the Ctrl-C a test sends would be lost."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
