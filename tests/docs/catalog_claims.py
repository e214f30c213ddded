"""The paper comparison of docs/catalog.md, rendered from results/catalog/leaderboard.csv
(`tests/docs/test_docs_catalog_page.py` holds the page's section equal to `render`).

Each paper's claim is one comparison on one board: entry A against entries B...

On task T, entry A against entries B...: "agrees" when A's 95 % interval of mean past train lies
entirely on the better side of every B's, "disagrees" when entirely on the worse side of every B's,
"not separated" when it overlaps every B's, "mixed" otherwise, "cannot tell" when an entry did not
learn the task.
"""
import sys

import pandas as pd

from lenbench.report.tables import _fmt_ci, wrap_prose

CLAIMS = [
    # (encoding label, paper, claim, task, A, [B...], table)  table: "rank" or "variant_rank"
    ("ALiBi", "Press et al. 2022",
     "trained short, its perplexity holds past the training length where sinusoidal and rotary ones do not",
     "lm", "alibi", ["sinusoidal", "rope"], "rank"),
    ("KERPLE", "Chi et al. 2022", "its logarithmic kernel extrapolates better than ALiBi",
     "lm", "kerple", ["alibi"], "rank"),
    ("Sandwich", "Chi et al. 2023", "parameter-free, it extrapolates better than sinusoidal embeddings",
     "lm", "sandwich", ["sinusoidal"], "rank"),
    ("FIRE", "Li et al. 2023", "it generalises past the training length better than ALiBi, KERPLE and T5's bias",
     "lm", "fire", ["alibi", "kerple", "t5"], "rank"),
    ("xPos", "Sun et al. 2022", "its decay makes RoPE extrapolate: lower perplexity than RoPE past the training length",
     "lm", "xpos", ["rope"], "rank"),
    ("CoPE", "Golovneva et al. 2024", "counting positions extrapolates better than RoPE on language modelling",
     "lm", "cope", ["rope"], "rank"),
    ("NoPE", "Kazemnejad et al. 2023",
     "on algorithmic tasks a decoder without positional encoding generalises to longer inputs better than "
     "ALiBi, RoPE and T5's bias",
     ("copy", "reverse", "sort", "addition"), "nope", ["alibi", "rope", "t5"], "rank"),
    ("Randomized PE", "Ruoss et al. 2023",
     "training on randomized positions from a larger range improves length generalisation on algorithmic tasks",
     ("copy", "reverse", "sort", "addition"), "randomized-rope", ["rope"], "rank"),
    ("PI", "Chen et al. 2023",
     "interpolated positions plus a short fine-tune beat interpolation alone and plain extrapolation",
     "lm", "rope+finetune-linear-x4", ["rope+linear", "rope"], "variant_rank"),
    ("NTK-aware scaling", "bloc97 2023", "raising the base beats position interpolation without fine-tuning",
     "lm", "rope+ntk", ["rope+linear"], "variant_rank"),
    ("YaRN", "Peng et al. 2023", "without fine-tuning it beats PI and NTK-aware scaling",
     "lm", "rope+yarn", ["rope+linear", "rope+ntk"], "variant_rank"),
    ("YaRN fine-tuned", "Peng et al. 2023", "fine-tuned, it beats PI fine-tuned for the same steps",
     "lm", "rope+finetune-yarn-x4", ["rope+finetune-linear-x4"], "variant_rank"),
    ("FoX", "Lin et al. 2025", "the forget gate extrapolates where a RoPE Transformer does not",
     "lm", "fox", ["rope"], "rank"),
    ("Stick-breaking", "Tan et al. 2025", "without positions it extrapolates better than softmax with RoPE",
     "lm", "stickbreaking", ["rope"], "rank"),
    ("p-RoPE", "Barbero et al. 2025", "removing RoPE's lowest frequencies makes it more robust",
     "lm", "prope", ["rope"], "rank"),
    ("DAPE", "Zheng et al. 2024", "adapting its base bias to the attention extrapolates better than the bias alone",
     "lm", "dape", ["kerple"], "rank"),
    ("SSMax", "Nakanishi 2025", "scaling the logits by s·log n improves length generalisation",
     "lm", "ssmax+rope", ["rope"], "rank"),
    ("SSMax over NoPE", "Nakanishi 2025", "the same over a decoder without positions",
     "lm", "ssmax", ["nope"], "rank"),
]


def judge(d, task, a, bs, table):
    """One sentence: the numbers of `a` and `bs` on `task` and the verdict; None when absent."""
    b = d[d.task == task]
    if b.empty:
        return None
    metric = b.ranked_by.iloc[0]

    hib = str(b[(b.metric == metric) & (b.statistic == "past_train_mean")].higher_is_better.iloc[0]) == "True"

    def cell(series):
        g = b[b.series == series]
        past = g[(g.statistic == "past_train_mean") & (g.metric == metric)].iloc[0]
        rank = g[(g.statistic == table) & (g.metric == b.metric.iloc[0])].iloc[0].value
        return (_fmt_ci(past.value, past.ci_low, past.ci_high, metric), rank, str(g.not_learned.iloc[0]) == "True",
                past.value, past.ci_low, past.ci_high)

    try:
        ca = cell(a)
        cbs = [(s, cell(s)) for s in bs]
    except IndexError:
        return None

    def show(s, c):
        return f"{s} {c[0]}" + (" (not learned)" if c[2] else f" (rank {int(c[1])})" if c[1] == c[1] else "")

    def side(c):  # +1: A better than this entry, intervals apart; -1: worse; 0: the intervals overlap
        if ca[4] > c[5] or ca[5] < c[4]:
            return 1 if (ca[3] > c[3]) == hib else -1
        return 0

    sides = [side(c) for _, c in cbs]
    if [s for s, c in [(a, ca), *cbs] if c[2]]:
        verdict = "cannot tell"
    elif all(x == 1 for x in sides):
        verdict = "agrees"
    elif all(x == -1 for x in sides):
        verdict = "disagrees"
    elif all(x == 0 for x in sides):
        verdict = "not separated"
    else:
        verdict = "mixed"
    where = f"{task}'s RoPE variant table" if table == "variant_rank" else task
    return (f"On {where}, {metric} past the training length: {show(a, ca)} against "
            f"{', '.join(show(s, c) for s, c in cbs)}: **{verdict}**.")


def render(path) -> str:
    """The section's bullets (markdown, wrapped at 110), one per claim on the board."""
    d = pd.read_csv(path, keep_default_na=False, na_values=[""])
    d = d[d.task != "overall"]
    out = []
    for label, paper, claim, tasks, a, bs, table in CLAIMS:
        tasks = (tasks,) if isinstance(tasks, str) else tasks
        parts = []
        for task in tasks:
            part = judge(d, task, a, bs, table)
            if part is not None:
                parts.append(part)
        if not parts:
            continue
        text = f"- **{label}** ({paper}): {claim}. " + " ".join(parts)
        out.append(wrap_prose(text, indent="  "))
    return "\n".join(out)


if __name__ == "__main__":
    print(render(sys.argv[1]))
