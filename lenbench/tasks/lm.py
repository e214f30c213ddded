"""`lm`: byte-level language modelling on a text file, scored on held-out text.

Evaluation scores only the last `eval_tokens` predictions of each window, so a model is not
rewarded at long lengths merely because most of its tokens sit far from the start of the window
(the "early token curse"; Press et al. 2022, "Train Short, Test Long" (ALiBi), appendix on
sliding-window evaluation).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from lenbench.tasks._common import check_length, check_sample_args
from lenbench.tasks.base import Batch, Task, register_task
from lenbench.tasks.corpora import KINDS, long_range_documents
from lenbench.tasks.lm_context import evaluate_lm_context
from lenbench.tasks.params import Param

#: Standard-library modules whose source files, joined in this order, form the default corpus. They
#: ship with every CPython installation, so the corpus needs no download; its bytes (and sha256,
#: recorded by `fingerprint`) differ between Python versions.
STDLIB_MODULES: tuple[str, ...] = (
    "abc", "argparse", "bisect", "calendar", "collections", "dataclasses", "difflib", "enum",
    "fractions", "functools", "heapq", "inspect", "json.decoder", "json.encoder", "shlex",
    "statistics", "textwrap", "tokenize", "typing",
)  # fmt: skip

#: Fraction of the corpus (its first bytes) used for training; the rest is held out for "eval".
TRAIN_FRACTION = 0.9


def stdlib_module_path(module: str) -> Path:
    """Source file of a standard-library module: ``<stdlib>/a/b.py`` or ``<stdlib>/a/b/__init__.py``."""
    base = Path(sysconfig.get_paths()["stdlib"]) / module.replace(".", "/")
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"task 'lm': the standard-library source of {module!r} is missing under {base.parent} "
        "(this Python ships without .py sources); pass path= to a UTF-8 text file"
    )


@dataclass(frozen=True)
class _Corpus:
    """A corpus in memory: its bytes, the training split's size (its first bytes) and, for a corpus
    of documents, the held-out documents as (kind index, start, end) spans of `data`."""

    data: torch.Tensor  # (N,) uint8
    sha256: str
    train_bytes: int | None = None
    held_out: tuple[tuple[int, int, int], ...] = ()

    @property
    def size(self) -> int:
        return self.data.numel()

    @property
    def train_size(self) -> int:
        return int(self.size * TRAIN_FRACTION) if self.train_bytes is None else self.train_bytes


def _tensor(raw: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)


@functools.lru_cache(maxsize=8)
def _load(paths: tuple[str, ...]) -> _Corpus:
    """Read and join `paths` once per process."""
    raw = b"".join(Path(p).read_bytes() for p in paths)
    return _Corpus(data=_tensor(raw), sha256=hashlib.sha256(raw).hexdigest())


@functools.lru_cache(maxsize=1)
def _load_long_range() -> _Corpus:
    """The long-range corpus (`lenbench.tasks.corpora`) once per process: the training documents,
    then the held-out ones, each kind in name order. Its sha256 is over every document's name and
    bytes in that order, so it changes with any file, name or split."""
    docs = long_range_documents()
    train = [d for d in docs if not d.held_out]
    held = [d for d in docs if d.held_out]
    digest = hashlib.sha256()
    for d in (*train, *held):
        digest.update(d.name.encode() + b"\0" + len(d.data).to_bytes(8, "little") + d.data)
    spans, at = [], sum(len(d.data) for d in train)
    for d in held:
        spans.append((KINDS.index(d.kind), at, at + len(d.data)))
        at += len(d.data)
    raw = b"".join(d.data for d in (*train, *held))
    return _Corpus(data=_tensor(raw), sha256=digest.hexdigest(), train_bytes=sum(len(d.data) for d in train),
                   held_out=tuple(spans))


def _fits(size: int, n: int) -> bool:
    """Whether a corpus of `size` bytes trains at `n` bytes and evaluates at `n` (held-out window + span)."""
    train = int(size * TRAIN_FRACTION)
    return train >= n + 1 and size - train >= 2 * n + 1


def _bytes_needed(n: int) -> int:
    """The smallest corpus size (bytes) that `_fits` length `n`."""
    size = max(1, int((2 * n + 1) / (1 - TRAIN_FRACTION)) - 16, int((n + 1) / TRAIN_FRACTION) - 16)
    while not _fits(size, n):
        size += 1
    return size


#: The built-in corpora of the `lm` task (its `source` parameter).
SOURCES = ("stdlib", "long-range")


@functools.lru_cache(maxsize=4)
def _eligible(corpus: _Corpus, context: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per kind of a document corpus: the first eligible window end of each held-out document longer
    than `context` (its start + context) and the cumulative count of eligible ends (cached per
    corpus object: its hash is its tensor's identity and its spans)."""
    out = []
    for k in range(len(KINDS)):
        spans = [(s, e) for kind, s, e in corpus.held_out if kind == k and e - s > context]
        starts = torch.tensor([s + context for s, _ in spans], dtype=torch.long)  # first eligible end per document
        counts = torch.tensor([e - s - context for s, e in spans], dtype=torch.long)
        out.append((starts, counts.cumsum(0) if len(spans) else torch.zeros(1, dtype=torch.long)))
    return out


@register_task("lm")
class ByteLMTask(Task):
    """Next-byte prediction on windows of ``length`` bytes of a text corpus.

    Layout: token id = byte value, ``vocab_size = 256``. ``length`` counts tokens (bytes): a window of
    ``length + 1`` bytes at a uniformly random offset gives ``inputs = w[:-1]`` and ``targets =
    w[1:]``, so ``seq_len(length) = length``. Split "train" draws windows from the first 90 % of the
    corpus and scores every target; split "eval" draws from the last 10 % and scores only the last
    ``eval_tokens`` targets of each window (all of them when ``length <= eval_tokens``); split "val"
    draws held-out windows whose bytes no evaluation scores (`_val_ends`) and scores every target. ``kind =
    "lm"``: scored by NLL / perplexity, so ``chance`` is None.

    Args:
        path: a UTF-8 text file to use as the corpus; default: the corpus named by `source`.
        eval_tokens: targets scored per window on the "eval" split.
        source: the built-in corpus: "stdlib" (the Python standard library's own sources of
            `STDLIB_MODULES`, joined in that order, the last 10 % held out) or "long-range" (whole
            documents of code, prose and structured data, held out by document:
            `lenbench.tasks.corpora`). On "long-range" every evaluation window lies inside one
            held-out document, its last byte at least `context` bytes from the document's start, the
            kind drawn uniformly, then the position (the same draws at every length).
        context: "long-range" only: the longest evaluation length (bytes) whose windows stay inside
            one document; the catalog's 16x of 64 bytes is 1024.

    Worked example (corpus bytes ``b"def f(x):"``, length 4, window at offset 0)::

        window    = d    e    f    ␠    f          (100 101 102 32 102)
        inputs    = 100  101  102  32
        targets   = 101  102  32   102
        loss_mask = x    x    x    x                (train)
        loss_mask = .    .    x    x                (eval with eval_tokens=2)

    >>> task = ByteLMTask(eval_tokens=2)
    >>> task.seq_len(4), task.vocab_size, task.kind, task.chance
    (4, 256, 'lm', None)
    """

    description = "byte-level language modelling on held-out text"
    paper = "Press et al. 2022, Train Short, Test Long"
    length_unit = "tokens"
    kind = "lm"
    eval_scope_without_length = True
    chance = None
    PARAMS = {"path": Param(str, optional=True), "eval_tokens": Param(int, low=1), "source": Param(str, choices=SOURCES),
              "context": Param(int, low=1)}

    def __init__(self, path: str | os.PathLike | None = None, eval_tokens: int = 32, source: str = "stdlib",
                 context: int = 1024) -> None:
        self.eval_tokens = self.param("eval_tokens", eval_tokens)
        self.context = self.param("context", context)
        self.param("source", source)
        self.param("path", path)
        if path is not None and source != "stdlib":
            raise ValueError(f"task {self.name!r}: pass either path= or source={source!r}, not both")
        self.source = source
        if source == "long-range":
            self.path = None
            self._paths = ()
            self._description = "the long-range corpus (lenbench.tasks.corpora: code, prose, data)"
        elif path is None:
            self.path = None
            self._paths = tuple(str(stdlib_module_path(m)) for m in STDLIB_MODULES)
            version = f"{sys.version_info.major}.{sys.version_info.minor}"
            self._description = f"Python {version} standard library sources: {', '.join(STDLIB_MODULES)}"
        else:
            p = Path(path).expanduser()
            if not p.is_file():
                raise ValueError(f"task {self.name!r}: corpus path {os.fspath(path)!r} is not a file")
            try:
                p.read_bytes().decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"task {self.name!r}: corpus path {os.fspath(path)!r} is not UTF-8 text (byte "
                                 f"{err.start}: {err.reason}); pass a UTF-8 text file") from None
            self.path = p
            self._paths = (str(p.resolve()),)
            self._description = f"file {os.fspath(path)}"

    @property
    def vocab_size(self) -> int:
        return 256

    def seq_len(self, length: int) -> int:
        return check_length(self, length)

    @property
    def corpus(self) -> _Corpus:
        return _load_long_range() if self.source == "long-range" else _load(self._paths)

    def fingerprint(self) -> dict:
        return {"corpus": self._description, "corpus_sha256": self.corpus.sha256}

    def extra_metrics(self, ratio: float) -> list[str]:
        """Past the training length (ratio > 1): `window_perplexity` (the same targets, context cut
        to the training length) and `context_gain` = window_perplexity / perplexity."""
        return ["window_perplexity", "context_gain"] if ratio > 1 else []

    def extra_measurements(self, model, length: int, train_len: int, ratio: float, **kw) -> list[dict]:
        """Per-position nll buckets ("pos:a-b") at every ratio, after the `extra_metrics` of
        `ratio`, which tell "uses the longer context" from "ignores it"
        (`lenbench.tasks.lm_context.evaluate_lm_context`)."""
        res = evaluate_lm_context(model, self, length, self.seq_len(train_len), **kw)
        rows = [{"metric": m, "value": res[m], "n_samples": res["n_samples"]} for m in self.extra_metrics(ratio)]
        return rows + [{"bucket": label, "metric": "nll", "value": value, "n_samples": res["n_samples"]}
                       for label, value, _ in res["positions"]]

    def check_train_len(self, length: int) -> None:
        """Reject a corpus too short to train and evaluate at `length`: training needs ``length + 1``
        bytes in the first 90 %, evaluation at the training length ``2·length + 1`` held out (the
        window and the span its ends are drawn from, see `_eval_ends`).

        Args:
            length: the cell's training length in bytes.

        Raises:
            ValueError: one line with the corpus size and the size it needs.
        """
        n = check_length(self, length)
        if self.source == "long-range":
            self._check_context(n, "train_len")
            return
        size = self.corpus.size
        if not _fits(size, n):
            raise ValueError(
                f"task {self.name!r}: the corpus has {size} bytes but train_len {n} needs at least "
                f"{_bytes_needed(n)} ({n + 1} to train on in the first {TRAIN_FRACTION:.0%}, {2 * n + 1} held out to "
                f"evaluate at the training length: {self._description}); pass a larger path= or a shorter train_len")

    def _eval_ends(self, batch_size: int, n: int, lo: int, hi: int, generator: torch.Generator) -> torch.Tensor:
        """Window ends (B, 1) for evaluation, drawn from the last half of the held-out split.

        The draw does not depend on the window length `n`, so the same generator scores the same
        tokens at every evaluation length: only the context before them grows.
        """
        span = (hi - lo) // 2
        if n > hi - lo - span - 1:
            raise ValueError(
                f"task {self.name!r}: eval length {n} exceeds the {hi - lo - span - 1} bytes of context the "
                f"held-out split allows ({self._description}); pass a shorter length or a larger path="
            )
        u = torch.rand(batch_size, 1, generator=generator, dtype=torch.float64)  # (B, 1) uniform in [0, 1)
        return hi - 1 - (u * span).long()  # (B, 1): index of the last target byte, in [hi − span, hi − 1]

    def _val_ends(self, batch_size: int, n: int, lo: int, hi: int, generator: torch.Generator) -> torch.Tensor:
        """Window ends (B, 1) for validation: held-out text whose bytes no evaluation scores.

        On a single text (stdlib, path=) evaluation windows end in the last half of the held-out
        split (`_eval_ends`) and score their last `eval_tokens` targets, so validation windows lie in
        its first half, ending `eval_tokens` bytes before it. On the long-range
        corpus evaluation scores the last `eval_tokens` bytes of windows ending at least `context`
        bytes into a held-out document, so validation windows end at most ``context - eval_tokens``
        bytes into one (documents longer than `context`, drawn uniformly, then the end).
        """
        if self.source != "long-range":
            first, last = lo + n, hi - (hi - lo) // 2 - self.eval_tokens  # before every scored byte
            if last < first:
                raise ValueError(f"task {self.name!r}: validation at length {n} needs {n + 1} bytes in the first half "
                                 f"of the held-out split, which has {max(0, last - lo + 1)} ({self._description}); "
                                 "pass a shorter train_len or a larger path=")
            return torch.randint(first, last + 1, (batch_size, 1), generator=generator)
        room = self.context - self.eval_tokens - n + 1  # ends per document: s + n … s + context − eval_tokens
        docs = [(st, e) for _, st, e in self.corpus.held_out if e - st > self.context]
        if room < 1 or not docs:
            raise ValueError(f"task {self.name!r}: validation at length {n} needs context - eval_tokens >= {n} "
                             f"(context={self.context}, eval_tokens={self.eval_tokens}) and a held-out document longer "
                             "than context; pass a larger context or a shorter train_len")
        u = torch.rand(batch_size, 2, generator=generator, dtype=torch.float64)  # (B, 2)
        starts = torch.tensor([st for st, _ in docs], dtype=torch.long)
        doc = (u[:, 0] * len(docs)).long().clamp(max=len(docs) - 1)  # (B,)
        return (starts[doc] + n + (u[:, 1] * room).long().clamp(max=room - 1))[:, None]  # (B, 1)

    def _check_context(self, n: int, what: str) -> None:
        """On the long-range corpus, a window of `n` bytes must fit inside one document (`context`)."""
        if n > self.context:
            raise ValueError(f"task {self.name!r}: {what} {n} exceeds context={self.context}, the longest "
                             f"window the long-range corpus keeps inside one document; pass context >= {n}")

    def _held_out_ends(self, batch_size: int, n: int, generator: torch.Generator) -> torch.Tensor:
        """Window ends (B, 1) on the long-range corpus: a kind uniformly, then a byte of its held-out
        documents at least `context` bytes from the document's start (independent of `n`, as
        `_eval_ends`)."""
        self._check_context(n, "eval length")
        pools = _eligible(self.corpus, self.context)  # per kind: (starts, cumulative counts)
        if any(int(cum[-1]) == 0 for _, cum in pools):
            raise ValueError(f"task {self.name!r}: a kind of the long-range corpus has no held-out document longer "
                             f"than context={self.context} bytes; pass a smaller context")
        u = torch.rand(batch_size, 2, generator=generator, dtype=torch.float64)  # (B, 2)
        kinds = (u[:, 0] * len(pools)).long().clamp(max=len(pools) - 1)  # (B,)
        ends = torch.empty(batch_size, 1, dtype=torch.long)
        for k, (starts, cum) in enumerate(pools):
            rows = (kinds == k).nonzero().flatten()
            at = (u[rows, 1] * int(cum[-1])).long()  # (b,) a position among the kind's eligible bytes
            doc = torch.searchsorted(cum, at, right=True)  # (b,) the document holding it
            before = torch.cat([cum.new_zeros(1), cum])[doc]
            ends[rows, 0] = starts[doc] + (at - before)
        return ends  # (B, 1): index of the last target byte

    def sample(self, batch_size: int, length: int, generator: torch.Generator, split: str = "train") -> Batch:
        n = check_length(self, length)
        check_sample_args(self, batch_size, split)
        corpus = self.corpus
        lo, hi = (0, corpus.train_size) if split == "train" else (corpus.train_size, corpus.size)
        if hi - lo < n + 1:
            raise ValueError(
                f"task {self.name!r}: length {n} needs {n + 1} bytes but the {split} split of the corpus has "
                f"{hi - lo} bytes (corpus {corpus.size} bytes, the last {1 - TRAIN_FRACTION:.0%} held out "
                f"for eval: {self._description}); pass a shorter length or a larger path="
            )
        if split == "train":
            start = torch.randint(lo, hi - n, (batch_size, 1), generator=generator)  # (B, 1), start ≤ hi-(n+1)
        elif split == "val":
            start = self._val_ends(batch_size, n, lo, hi, generator) - n  # (B, 1)
        elif self.source == "long-range":
            start = self._held_out_ends(batch_size, n, generator) - n  # (B, 1)
        else:
            start = self._eval_ends(batch_size, n, lo, hi, generator) - n  # (B, 1)
        window = corpus.data[start + torch.arange(n + 1)].long()  # (B, n+1)
        inputs = window[:, :-1].contiguous()  # (B, n)
        targets = window[:, 1:].contiguous()  # (B, n)
        loss_mask = torch.ones_like(targets, dtype=torch.bool)  # (B, n)
        if split == "eval":
            loss_mask[:, : max(n - self.eval_tokens, 0)] = False
        return Batch(inputs, targets, loss_mask)
