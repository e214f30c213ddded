"""The metric registry: every fact about a metric, stated once.

A metric is one `register_metric` call (below, or in a plug-in / test), and every module reads its
facts from here: the evaluation (`lenbench.evaluate`: which per-sample sums it is built from, the
task kinds it is recorded for, its value from those sums), the report (`lenbench.report.rows`,
`lenbench.report.stats`, `lenbench.report.tables`: direction, the score of a failed length, the
leaderboard metric of a task kind, the learned threshold, the bootstrap's vectorised value) and
`lenbench compare` (`lenbench.compare.stats`: the default practical margin). No torch here, so the
report and compare paths can read the facts without importing the model.

**Per-sample scores.** Every metric with `sums` is f(Σ numerators / Σ denominators) over the
evaluation samples: exact match (hit 0/1 over 1: ``"examples"``), token accuracy (correct over
scored tokens: ``"tokens"``), nll / bits per byte / perplexity (summed nll over scored tokens:
``"nll"``, then identity, / ln 2 or exp). A row stores its samples in that form, so a bootstrap
over samples (`lenbench.report.stats`) reproduces the metric exactly without a rerun. Stored form
(compact, the same string in cell JSON, benchmark JSON and results.csv): entries separated by
spaces in generator order, each "num" (denominator 1) or "num/den"; nll sums are written with 7
significant digits (`encode_samples`, `decode_samples`, `decode_arrays`).

Example (a toy metric; `unregister_metric` takes it out again):
    >>> m = register_metric("toy_rate", higher_is_better=True, sums="tokens", worst=0.0,
    ...                     transform=lambda ratio, xp: 2 * ratio, margin=Margin(0.05, False))
    >>> metric_transform("toy_rate", 0.25), worst_value("toy_rate", True), MARGINS["toy_rate"]
    (0.5, 0.0, Margin(value=0.05, relative=False))
    >>> get_metric("toy_rat")
    Traceback (most recent call last):
    ...
    lenbench.registry.UnknownNameError: unknown metric 'toy_rat'; did you mean 'toy_rate'? (known: ...)
    >>> unregister_metric("toy_rate")
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from lenbench.registry import UnknownNameError, did_you_mean

#: The per-sample (numerator, denominator) pairs a metric can be built from (`lenbench.evaluate.sample_sums`):
#: "tokens" (generated answer tokens correct / scored tokens), "examples" (the whole generated answer
#: correct / 1), "teacher_forced_tokens" (tokens correct with the true previous answer tokens as
#: inputs / scored tokens), "nll" (summed nll / scored tokens).
SUMS = ("tokens", "examples", "teacher_forced_tokens", "nll")
#: The sums whose metric is a rate of right tokens, so a task's per-token chance is its floor.
TOKEN_RATE_SUMS = ("tokens", "teacher_forced_tokens")

#: The scalar counterpart of numpy for a transform (`Metric.value`): the same float operations as
#: the vectorised path would do element-wise with numpy (`Metric.values`).
SCALAR = types.SimpleNamespace(exp=math.exp, minimum=min, log=math.log)


@dataclasses.dataclass(frozen=True)
class Margin:
    """The practical margin of one metric: `value` absolute, or relative to |base| when `relative`."""

    value: float
    relative: bool

    def of(self, base: float) -> float:
        return self.value * abs(base) if self.relative else self.value

    def describe(self) -> str:
        return f"{self.value:.3g} relative" if self.relative else f"{self.value:.3g} absolute"


#: The margin of a metric that states none, and of an unregistered one: 1 % of base.
FALLBACK_MARGIN = Margin(0.01, True)


def identity(ratio, xp=SCALAR):
    """The transform of a metric that is the ratio itself."""
    return ratio


def decode_arrays(text: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(numerators, denominators) arrays of a sample_scores string, None when empty."""
    if not text:
        return None
    if "/" not in text:
        num = np.array(text.split(), dtype=float)
        return num, np.ones_like(num)
    pairs = [e.partition("/") for e in text.split()]
    num = np.array([p[0] for p in pairs], dtype=float)
    den = np.array([p[2] or 1.0 for p in pairs], dtype=float)
    return num, den


@dataclasses.dataclass(frozen=True)
class Metric:
    """The facts of one metric (register with `register_metric`).

    Attributes:
        name: the metric's name in rows (``metric`` column).
        higher_is_better: direction (the rows' ``higher_is_better`` default, ranks, regressions).
        description: one line: what it measures.
        sums: which per-sample sums it is f(Σ num / Σ den) of (one of `SUMS`), None when it has no
            per-sample form (then rows carry no sample scores for it).
        recorded_for: the task kinds `lenbench.evaluate.evaluate_length` records it for.
        primary_for: the task kinds whose leaderboard it ranks.
        secondary_for: the task kinds whose leaderboard shows it beside the primary metric, and
            ranks by it past the training length where the primary is at its floor there for
            every learned entry (`lenbench.report.tables.leaderboard`).
        why: with `secondary_for`, the one-line reason the board shows it (the docs and the
            board's note quote it).
        worst: the score of a failed length; None: −inf / +inf by direction.
        transform: ``transform(ratio, xp)``, the value from Σ num / Σ den, with `xp` numpy (arrays)
            or `SCALAR` (floats): write it with ``xp.exp`` / ``xp.minimum`` so both paths do the same
            float operations.
        margin: the default practical margin of ``lenbench compare --statistical``.
        learned_min: the minimum in-distribution score of a learned model (higher-is-better
            metrics), None: none (lower-is-better metrics use the unigram baseline instead).
        bounds: the metric's whole range where it has one (accuracies: ``(0.0, 1.0)``): figures
            show all of it, heatmap cells print two decimals; None: unbounded (tables print a
            value of 1000 or more in four significant digits).
        log_scale: figures and heatmap colours use a log scale (a ratio of two values reads as a
            distance: perplexity).
        ranks_on: the statistic its boards rank by (`lenbench.report.stats.RANKING`): "area" (the
            area past train, in the metric's direction) or "degradation" (nll past the training
            length minus nll at 1× on the same scored samples, lower better; metrics built from nll
            sums, whose level past training mostly restates how well the model fit at 1×).
    """

    name: str
    higher_is_better: bool
    description: str = ""
    sums: str | None = None
    recorded_for: tuple[str, ...] = ()
    primary_for: tuple[str, ...] = ()
    secondary_for: tuple[str, ...] = ()
    why: str = ""
    worst: float | None = None
    transform: Callable[..., Any] = identity
    margin: Margin = FALLBACK_MARGIN
    learned_min: float | None = None
    bounds: tuple[float, float] | None = None
    log_scale: bool = False
    ranks_on: str = "area"

    @property
    def per_token_rate(self) -> bool:
        """The metric is a rate of right answer tokens (its floor is the task's per-token chance)."""
        return self.sums in TOKEN_RATE_SUMS

    @property
    def worst_value(self) -> float:
        """The score of a failed length."""
        if self.worst is not None:
            return self.worst
        return -math.inf if self.higher_is_better else math.inf

    def value(self, ratio: float) -> float:
        """The metric's value from the ratio of summed numerators to summed denominators."""
        return self.transform(ratio, SCALAR)

    def values(self, ratio: np.ndarray) -> np.ndarray:
        """Vectorised `value`."""
        return self.transform(ratio, np)

    def decode(self, text: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(numerators, denominators) of a sample_scores string of this metric, None when empty."""
        return decode_arrays(text)


_REGISTRY: dict[str, Metric] = {}
#: What a metric's boards may rank by (`Metric.ranks_on`).
RANKS_ON = ("area", "degradation")


def register_metric(name: str, *, higher_is_better: bool, description: str = "", sums: str | None = None,
                    recorded_for: Iterable[str] = (), primary_for: Iterable[str] = (), worst: float | None = None,
                    transform: Callable[..., Any] = identity, margin: Margin = FALLBACK_MARGIN,
                    learned_min: float | None = None, secondary_for: Iterable[str] = (), why: str = "",
                    bounds: tuple[float, float] | None = None, log_scale: bool = False,
                    ranks_on: str = "area") -> Metric:
    """Register a metric: every fact of it in one call (see `Metric` for each argument).

    Returns:
        the registered `Metric`.

    Raises:
        ValueError: a name registered twice, `sums` not one of `SUMS`, a task kind whose
            leaderboard another metric already ranks (or already has a secondary metric), or a
            secondary metric without its `why`.
    """
    if name in _REGISTRY:
        raise ValueError(f"metric {name!r} is registered twice")
    if sums is not None and sums not in SUMS:
        raise ValueError(f"metric {name!r}: sums {sums!r} is not one of {', '.join(SUMS)}{did_you_mean(sums, SUMS)}")
    primary_for = tuple(primary_for)
    for kind in primary_for:
        if kind in PRIMARY_METRIC:
            raise ValueError(f"metric {name!r}: task kind {kind!r} is already ranked by {PRIMARY_METRIC[kind]!r}")
    secondary_for = tuple(secondary_for)
    for kind in secondary_for:
        if kind in SECONDARY_METRIC:
            raise ValueError(f"metric {name!r}: task kind {kind!r} already has the secondary metric "
                             f"{SECONDARY_METRIC[kind]!r}")
    if secondary_for and not why:
        raise ValueError(f"metric {name!r}: a secondary metric states why the board shows it (why=...)")
    if ranks_on not in RANKS_ON:
        raise ValueError(f"metric {name!r}: ranks_on {ranks_on!r} is not one of {', '.join(RANKS_ON)}")
    if ranks_on == "degradation" and sums != "nll":
        raise ValueError(f"metric {name!r}: ranks_on 'degradation' needs a metric built from nll sums (sums='nll')")
    if bounds is not None and not (len(bounds) == 2 and bounds[0] < bounds[1]):
        raise ValueError(f"metric {name!r}: bounds {bounds!r} is not a (low, high) pair with low < high")
    metric = Metric(name, bool(higher_is_better), description, sums, tuple(recorded_for), primary_for,
                    secondary_for, why, worst, transform, margin, learned_min,
                    None if bounds is None else (float(bounds[0]), float(bounds[1])), bool(log_scale), ranks_on)
    _REGISTRY[name] = metric
    return metric


def unregister_metric(name: str) -> None:
    """Remove a registered metric (for tests and plug-ins that registered one)."""
    get_metric(name)
    del _REGISTRY[name]


def get_metric(name: str) -> Metric:
    """The registered metric `name`; an unknown name is a one-line error with the closest known name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = list(_REGISTRY)
        raise UnknownNameError(f"unknown metric {name!r}{did_you_mean(name, known)} (known: {', '.join(known)})") from None


def find_metric(name: str) -> Metric | None:
    """The registered metric `name`, None for a column that is not one (``retention``, ``""``)."""
    return _REGISTRY.get(name)


def registered() -> list[Metric]:
    """Every registered metric, in registration order."""
    return list(_REGISTRY.values())


class _Facts(Mapping):
    """A live, read-only {metric name: fact} view of the registry (sees metrics registered later)."""

    def __init__(self, fact: Callable[[Metric], Any]) -> None:
        self._fact = fact

    def __getitem__(self, name: str) -> Any:
        return self._fact(_REGISTRY[name])

    def __iter__(self) -> Iterator[str]:
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return repr(dict(self))


class _Primary(Mapping):
    """A live, read-only {task kind: its leaderboard metric} view of the registry (`role`
    "primary_for"; "secondary_for": its secondary metric)."""

    def __init__(self, role: str = "primary_for") -> None:
        self._role = role

    def _table(self) -> dict[str, str]:
        return {kind: m.name for m in _REGISTRY.values() for kind in getattr(m, self._role)}

    def __getitem__(self, kind: str) -> str:
        return self._table()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return repr(self._table())


#: {metric: higher is better} of every registered metric.
METRICS: Mapping[str, bool] = _Facts(lambda m: m.higher_is_better)
#: {metric: default practical margin} of `lenbench compare --statistical`.
MARGINS: Mapping[str, Margin] = _Facts(lambda m: m.margin)
#: The metric each task kind is ranked by on the leaderboard.
PRIMARY_METRIC: Mapping[str, str] = _Primary()
#: The metric each task kind's leaderboard shows beside its primary one (and ranks by past the
#: training length where the primary is at its floor there).
SECONDARY_METRIC: Mapping[str, str] = _Primary("secondary_for")


def secondary_metric(primary: str) -> str | None:
    """The secondary metric of the boards `primary` ranks (None: no such kind, or none declared)."""
    found = _REGISTRY.get(primary)
    for kind in found.primary_for if found else ():
        if kind in SECONDARY_METRIC:
            return SECONDARY_METRIC[kind]
    return None


def task_metrics(kind: str) -> list[str]:
    """Metrics recorded for a task of `kind`, its primary metric first, then registration order.

    Raises:
        ValueError: no metric is recorded for `kind`.
    """
    recorded = [m.name for m in _REGISTRY.values() if kind in m.recorded_for]
    if not recorded:
        kinds = sorted({k for m in _REGISTRY.values() for k in m.recorded_for})
        raise ValueError(f"no metric is recorded for task kind {kind!r}{did_you_mean(kind, kinds)} "
                         f"(kinds: {', '.join(kinds)}); register one with recorded_for=({kind!r},)")
    primary = PRIMARY_METRIC.get(kind)
    return sorted(recorded, key=lambda name: name != primary)  # stable: the rest keep registration order


def leaderboard_metric(kind: str | None, present: Iterable[str]) -> str:
    """The leaderboard metric among `present`: the primary metric of `kind` (None: unknown), else
    the first primary metric present, else the first present by name."""
    present = set(present)
    if kind is not None and PRIMARY_METRIC.get(kind) in present:
        return PRIMARY_METRIC[kind]
    for metric in PRIMARY_METRIC.values():
        if metric in present:
            return metric
    return sorted(present)[0]


def metric_transform(metric: str, ratio: float) -> float:
    """The metric's value from the ratio of summed numerators to summed denominators (unknown: the ratio)."""
    found = _REGISTRY.get(metric)
    return ratio if found is None else found.value(ratio)


def transform_array(metric: str, ratio: np.ndarray) -> np.ndarray:
    """Vectorised `metric_transform`."""
    found = _REGISTRY.get(metric)
    return ratio if found is None else found.values(ratio)


def worst_value(metric: str, higher_is_better: bool) -> float:
    """The score of a failed length: the metric's `worst`, else −inf / +inf by direction."""
    found = _REGISTRY.get(metric)
    if found is not None:
        return found.worst_value
    return -math.inf if higher_is_better else math.inf


def learned_min(metric: str) -> float | None:
    """The minimum in-distribution score of a learned model on `metric`, None when it has none."""
    found = _REGISTRY.get(metric)
    return None if found is None else found.learned_min


def margin_of(metric: str) -> Margin:
    """The default practical margin of `metric` (unregistered: `FALLBACK_MARGIN`)."""
    found = _REGISTRY.get(metric)
    return FALLBACK_MARGIN if found is None else found.margin


def encode_samples(num: list[float], den: list[float]) -> str:
    """The compact string of per-sample (numerator, denominator) pairs (see the module docstring)."""

    def fmt(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:.7g}"

    return " ".join(fmt(n) if d == 1 else f"{fmt(n)}/{fmt(d)}" for n, d in zip(num, den, strict=True))


def decode_samples(text: str) -> tuple[list[float], list[float]]:
    """(numerators, denominators) of a string written by `encode_samples`; ("") gives ([], [])."""
    dec = decode_arrays(text)
    return ([], []) if dec is None else (dec[0].tolist(), dec[1].tolist())


# --- the metrics lenbench reports -----------------------------------------------------------------


def _exp(ratio, xp=SCALAR):
    """exp of the mean nll, clipped at 700 nats (no overflow)."""
    return xp.exp(xp.minimum(ratio, 700.0))


def _per_ln2(ratio, xp=SCALAR):
    """nats → bits."""
    return ratio / math.log(2)


# Registration order is the order of METRICS (and of compare's "known:" list).
register_metric("token_accuracy", higher_is_better=True, sums="tokens", recorded_for=("sequence",), worst=0.0,
                margin=Margin(0.02, False), learned_min=0.9, secondary_for=("sequence",), bounds=(0.0, 1.0),
                description="fraction of answer tokens the model generates right (greedy, its own answer fed back)",
                why="exact match needs every token of the answer right, so past the training length it falls to 0 "
                    "for every encoding while the share of right tokens still tells them apart")
register_metric("exact_match", higher_is_better=True, sums="examples", recorded_for=("sequence",),
                primary_for=("sequence",), worst=0.0, margin=Margin(0.02, False), learned_min=0.9, bounds=(0.0, 1.0),
                description="fraction of examples whose generated answer is entirely right (equal to every "
                            "answer token right under teacher forcing)")
register_metric("tf_token_accuracy", higher_is_better=True, sums="teacher_forced_tokens", recorded_for=("sequence",),
                worst=0.0, margin=Margin(0.02, False), bounds=(0.0, 1.0),
                description="teacher-forced token accuracy: each answer token predicted from the true previous ones; "
                            "a diagnostic, never ranked (copying the previous token scores well on it)")
register_metric("nll", higher_is_better=False, sums="nll", recorded_for=("lm",), margin=Margin(0.01, False),
                description="mean negative log-likelihood (nats) of scored tokens")
register_metric("perplexity", higher_is_better=False, sums="nll", recorded_for=("lm",), primary_for=("lm",),
                transform=_exp, margin=Margin(0.01, True), log_scale=True, ranks_on="degradation",
                description="exp(nll)")
register_metric("bits_per_byte", higher_is_better=False, sums="nll", recorded_for=("lm",), transform=_per_ln2,
                margin=Margin(0.01 / math.log(2), False),  # the same 1 % of perplexity on its log scale
                secondary_for=("lm",), ranks_on="degradation",
                why="the unit of the compression literature, additive over bytes where perplexity multiplies; a "
                    "monotone function of the same nll, so it never reorders the board",
                description="nll / ln 2: bits per scored byte (byte-level lm: one token = one byte)")
register_metric("window_perplexity", higher_is_better=False, margin=Margin(0.01, True),
                description="lm: perplexity of the same targets with the context cut to the training length")
register_metric("context_gain", higher_is_better=True, margin=Margin(0.01, True),
                description="lm: window_perplexity / perplexity; > 1 when the longer context helps")
