"""Each encoding's paper claim, judged on the board by the board's own paired test: ``claims.md``.

A claim is one comparison on one or more boards: entry A against entries B… (`CLAIMS`). Every
comparison is the leaderboard's paired t test over seeds (`lenbench.report.intervals.estimate` of
the per-seed differences, the same seeds and evaluation samples) on the area past train
(`lenbench.report.stats.AREA`) of the metric the board ranks by, and on boards whose metric is built from nll sums (lm) also on the
*degradation* (nll past the training length − nll at 1×, in nats): the claims are about holding
up past the training length, which the level alone confounds with in-distribution fit. All
comparisons of all claims form one family, Holm-corrected at `lenbench.report.ranks.ALPHA`.

Per (claim, board, statistic) the verdict is "agrees" when A is better than every B with
support, "disagrees" when worse than every B, "not separated" when no comparison is supported,
"mixed" otherwise, and "cannot tell" when an entry is not learned (or uncertain) at 1×. Each
claim names the facts of its designed regime (`Claim.regime`) and `claims_markdown` states them as
this board's cells have them (`lenbench.report.regimes`: RoPE's head dimension, FIRE's threshold
against the training length, …), so a reader knows what the verdict is worth on this board.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pandas as pd

from lenbench.escape import md_text
from lenbench.metrics import METRICS
from lenbench.report import intervals, ranks, stats
from lenbench.report.formatting import fmt_ci, fmt_value, wrap_prose
from lenbench.report.rows import board_rows
from lenbench.report.tables import Leaderboard


@dataclasses.dataclass(frozen=True)
class Claim:
    """One paper's claim as a comparison: on each of `tasks`, entry `a` (a series label) against
    each of `bs`, in the main table (`table` "rank") or an encoding's variant table ("variant_rank").
    `regime`: the facts of the method's designed regime this scale may leave, stated from each board's
    cells (`lenbench.report.regimes.FACTS`: "rope", "fire", "xpos", "randomized", "prope", "yarn", "hybrid")."""

    label: str
    paper: str
    claim: str
    tasks: tuple[str, ...]
    a: str
    bs: tuple[str, ...]
    table: str = "rank"
    regime: tuple[str, ...] = ()


_ALGORITHMIC = ("copy", "reverse", "sort", "addition")

CLAIMS = (
    Claim("ALiBi", "Press et al. 2022",
          "trained short, its perplexity holds past the training length where sinusoidal and rotary ones do not",
          ("lm",), "alibi", ("sinusoidal", "rope"), regime=("alibi", "rope")),
    Claim("KERPLE", "Chi et al. 2022", "its logarithmic kernel extrapolates better than ALiBi",
          ("lm",), "kerple", ("alibi",), regime=("alibi",)),
    Claim("Sandwich", "Chi et al. 2023", "parameter-free, it extrapolates better than sinusoidal embeddings",
          ("lm",), "sandwich", ("sinusoidal",), regime=("sandwich",)),
    Claim("FIRE", "Li et al. 2023", "it generalises past the training length better than ALiBi, KERPLE and T5's bias",
          ("lm",), "fire", ("alibi", "kerple", "t5"),
          regime=("fire", "alibi")),
    Claim("xPos", "Sun et al. 2022",
          "its decay makes RoPE extrapolate: lower perplexity than RoPE past the training length",
          ("lm",), "xpos", ("rope",), regime=("xpos", "rope")),
    Claim("CoPE", "Golovneva et al. 2024", "counting positions extrapolates better than RoPE on language modelling",
          ("lm",), "cope", ("rope",), regime=("rope",)),
    Claim("NoPE", "Kazemnejad et al. 2023",
          "on algorithmic tasks a decoder without positional encoding generalises to longer inputs better than "
          "ALiBi, RoPE and T5's bias", _ALGORITHMIC, "nope", ("alibi", "rope", "t5"), regime=("rope", "alibi")),
    Claim("Randomized PE", "Ruoss et al. 2023",
          "training on randomized positions from a larger range improves length generalisation on algorithmic tasks",
          _ALGORITHMIC, "randomized-rope", ("rope",),
          regime=("randomized", "rope")),
    Claim("PI", "Chen et al. 2023",
          "interpolated positions plus a short fine-tune beat interpolation alone and plain extrapolation",
          ("lm",), "rope+finetune-linear-x4", ("rope+linear", "rope"), "variant_rank", ("rope",)),
    Claim("NTK-aware scaling", "bloc97 2023", "raising the base beats position interpolation without fine-tuning",
          ("lm",), "rope+ntk", ("rope+linear",), "variant_rank", ("rope",)),
    Claim("YaRN", "Peng et al. 2023", "without fine-tuning it beats PI and NTK-aware scaling",
          ("lm",), "rope+yarn", ("rope+linear", "rope+ntk"), "variant_rank",
          ("rope", "yarn")),
    Claim("YaRN fine-tuned", "Peng et al. 2023", "fine-tuned, it beats PI fine-tuned for the same steps",
          ("lm",), "rope+finetune-yarn-x4", ("rope+finetune-linear-x4",), "variant_rank", ("rope",)),
    Claim("FoX", "Lin et al. 2025", "the forget gate extrapolates where a RoPE Transformer does not",
          ("lm",), "fox", ("rope",), regime=("rope",)),
    Claim("Stick-breaking", "Tan et al. 2025", "without positions it extrapolates better than softmax with RoPE",
          ("lm",), "stickbreaking", ("rope",), regime=("rope",)),
    Claim("p-RoPE", "Barbero et al. 2025", "removing RoPE's lowest frequencies makes it more robust",
          ("lm",), "prope", ("rope",),
          regime=("rope", "prope")),
    Claim("DAPE", "Zheng et al. 2024", "adapting its base bias to the attention extrapolates better than the bias alone",
          ("lm",), "dape", ("kerple",)),
    Claim("SSMax", "Nakanishi 2025", "scaling the logits by s·log n improves length generalisation",
          ("lm",), "ssmax+rope", ("rope",), regime=("rope",)),
    Claim("SSMax over NoPE", "Nakanishi 2025", "the same over a decoder without positions",
          ("lm",), "ssmax", ("nope",)),
    Claim("PaTH", "S. Yang et al. 2025",
          "its data-dependent Householder positions hold up past the training length, in retrieval and language "
          "modelling, where RoPE does not", ("lm", "passkey"), "path", ("rope",), regime=("rope",)),
    Claim("PaTH-FoX", "S. Yang et al. 2025", "PaTH with FoX's forget gate extrapolates better than either alone",
          ("lm", "passkey"), "path-fox", ("path", "fox")),
    Claim("PoPE", "Gopalakrishnan et al. 2025",
          "with position in the phase alone it extrapolates zero-shot where RoPE degrades, and beats RoPE with YaRN",
          ("lm",), "pope", ("rope", "rope+yarn"), regime=("rope",)),
    Claim("RNoPE-SWA", "B. Yang et al. 2025",
          "NoPE global layers interleaved with RoPE sliding-window layers retrieve past the training length better "
          "than RoPE or NoPE alone", ("passkey", "lm"), "rnope-swa", ("rope", "nope"), regime=("hybrid", "rope")),
    Claim("iRoPE", "Meta's Llama 4, 2025",
          "interleaving NoPE layers with chunked RoPE layers generalises past the training length where RoPE does not",
          ("passkey", "lm"), "irope", ("rope",), regime=("hybrid", "rope")),
    Claim("DroPE", "Gelberg et al. 2025",
          "dropping RoPE after training and recalibrating briefly retrieves past the training length better than "
          "RoPE, RoPE with YaRN and NoPE", ("passkey",), "rope+drope", ("rope", "rope+yarn", "nope"),
          "variant_rank", ("rope",)),
)


@dataclasses.dataclass
class _Test:
    """One comparison of a claim: A − B on one statistic of one board (oriented: > 0 favours A)."""

    claim: int
    task: str
    train_len: int
    statistic: str
    b: str
    est: intervals.Estimate
    reject: bool = False


def _statistics(board: stats.Board, key) -> list[str]:
    """The statistics a claim is judged on: the area past train (the board's ranking statistic), and
    degradation where it is defined."""
    out = [stats.AREA]
    if not math.isnan(float(pd.Series(board.seed_stats[key]["degradation"].theta).mean())):
        out.append("degradation")
    return out


def _boards(board: Leaderboard, c: Claim) -> list[tuple[str, int, pd.DataFrame]]:
    """The boards claim `c` applies to: (task, train_len, its per-task rows by series) where every entry is."""
    rows, out = board.per_task, []
    for task in c.tasks:
        for train_len in sorted(rows.loc[rows["task"] == task, "train_len"].unique()):
            t = board_rows(rows, task, train_len).set_index("series")
            if {c.a, *c.bs} <= set(t.index) and (task, int(train_len)) in board.boards:
                out.append((task, int(train_len), t))
    return out


def judge(board: Leaderboard, claims=CLAIMS) -> list[tuple[Claim, list[str]]]:
    """Each claim with its sentences, one per board it applies to (claims with none are left out)."""
    tests: list[_Test] = []
    where: dict[tuple[int, str, int], dict] = {}
    for i, c in enumerate(claims):
        for task, train_len, t in _boards(board, c):
            b = board.boards[(task, int(train_len))]
            key = {s: (t.at[s, "encoding"], t.at[s, "variant"]) for s in (c.a, *c.bs)}
            ranked_by = str(t["ranked_by"].iloc[0])
            hib = bool(METRICS.get(ranked_by, True))
            learned = all(t.at[s, "learnability"] == stats.LEARNED for s in (c.a, *c.bs))
            where[(i, task, int(train_len))] = {"table": t, "learned": learned, "metric": ranked_by,
                                                "statistics": _statistics(b, key[c.a])}
            if not learned:
                continue
            for stat in _statistics(b, key[c.a]):
                better_high = hib if stat == stats.AREA else False
                for s in c.bs:
                    diff = b.seed_stats[key[c.a]][stat] - b.seed_stats[key[s]][stat]
                    tests.append(_Test(i, task, int(train_len), stat, s,
                                       intervals.estimate(diff if better_high else -diff)))
    for t, rej in zip(tests, ranks.holm([t.est.p_two_sided() for t in tests]), strict=True):
        t.reject = rej
    out = []
    for i, c in enumerate(claims):
        parts = [_sentence(c, task, tl, w, [t for t in tests if (t.claim, t.task, t.train_len) == (i, task, tl)])
                 for (j, task, tl), w in where.items() if j == i]
        if parts:
            out.append((c, parts))
    return out


def _verdict(sides: list[int]) -> str:
    if all(x == 1 for x in sides):
        return "agrees"
    if all(x == -1 for x in sides):
        return "disagrees"
    if all(x == 0 for x in sides):
        return "not separated"
    return "mixed"


def _sentence(c: Claim, task: str, train_len: int, w: dict, tests: list[_Test]) -> str:
    t, metric = w["table"], w["metric"]
    where = f"{task}'s RoPE variant table" if c.table == "variant_rank" else task

    ranked_on = str(t["ranked_on"].iloc[0])

    def rank(s: str, stat: str) -> str:
        """The suffix " (rank N)" where the table ranks on `stat` and ranked `s`: a rank beside another
        statistic would not be that statistic's."""
        r = t.loc[s][c.table]
        return f" (rank {int(r)})" if stat == ranked_on and r == r else ""

    def show(s: str) -> str:
        r = t.loc[s]
        stat = stats.AREA if metric == r["metric"] else f"secondary_{stats.AREA}"
        score = fmt_ci(r[stat], r[f"{stat}_ci_low"], r[f"{stat}_ci_high"], metric)
        if r["learnability"] != stats.LEARNED:
            return f"{s} {score} ({r['learnability']})"
        return f"{s} {score}{rank(s, stats.AREA)}"

    text = f"On {where}, area of {metric} past the training length: {show(c.a)} against {', '.join(show(s) for s in c.bs)}"
    if not w["learned"]:
        return text + ": **cannot tell** (an entry did not learn the task at 1× with support)."
    parts = []
    for stat in w["statistics"]:
        own = [x for x in tests if x.statistic == stat]
        sides = [(1 if x.est.mean > 0 else -1) if x.reject else 0 for x in own]
        if stat == stats.AREA:
            parts.append(f"{text}: **{_verdict(sides)}**")
        else:
            r = t.loc[c.a]
            diffs = ", ".join(f"{x.b}{rank(x.b, stat)} {fmt_value(-x.est.mean)}" for x in own)  # A − B in nats
            parts.append(f"degradation (nll past training − nll at 1×, nats): {md_text(c.a)} "
                         f"{fmt_ci(r['degradation'], r['degradation_ci_low'], r['degradation_ci_high'], 'retention')}"
                         f"{rank(c.a, stat)}, A − B {diffs}: **{_verdict(sides)}**")
    return "; ".join(parts) + "."


INTRO = ("Each claim is judged by the board's own paired test: the t test over seeds of A − B (same seeds, same "
         "evaluation samples) on the area past train of the metric the board ranks by and, for lm, on the degradation "
         "(nll past the training length minus nll at 1×, the same scored bytes), every comparison of every claim "
         f"Holm-corrected together at a family-wise {ranks.ALPHA:g}. *agrees*: A better than every B with support; "
         "*disagrees*: worse than every B; *not separated*: no comparison supported; *mixed*: otherwise; *cannot "
         "tell*: an entry is not learned (or uncertain) at 1×. A rank is the entry's in its table (leaderboard.md), "
         "quoted beside the statistic the table ranks on; it comes from every pair of the table in one family, so "
         "a claim's fewer comparisons can separate entries that share a rank there, or that a noisier entry's "
         "rank places the other way round. Each claim says where the method ran outside its designed regime at "
         "this scale.")


def claims_markdown(board: Leaderboard, claims=CLAIMS,
                    regime: Callable[[Claim, list[tuple[str, int, dict[str, str]]]], str] | None = None) -> str:
    """``claims.md``: the intro, then one bullet per claim the board can judge (markdown, wrapped
    at 110); a line saying so when it can judge none.

    Args:
        board: the leaderboard.
        claims: the claims to judge.
        regime: (claim, its boards as (task, train_len, {series: encoding label})) → the clause stating
            the claim's regime on this board (`lenbench.report.regimes.regime_writer`), "" for none;
            None: no regime clauses (no cell configurations at hand).
    """
    judged = judge(board, claims)
    parts = ["# The papers' claims on this board", "", wrap_prose(INTRO), ""]
    if not judged:
        return "\n".join([*parts, "No claim's entries are on this board.", ""])
    for c, sentences in judged:
        boards = [(task, tl, {s: str(t.at[s, "encoding"]) for s in (c.a, *c.bs)}) for task, tl, t in _boards(board, c)]
        stated = regime(c, boards) if regime is not None and c.regime else ""
        regime_text = f" Regime: {stated}." if stated else ""
        parts.append(wrap_prose(f"- **{c.label}** ({c.paper}): {c.claim}.{regime_text} " + " ".join(sentences),
                                indent="  "))
    return "\n".join(parts) + "\n"
