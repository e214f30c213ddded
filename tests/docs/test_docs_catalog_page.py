"""docs/catalog.md ("What the catalog shows") and the README's summary of it, against the published
catalog (results/catalog/):

- results/catalog/findings.md is the rendering of its leaderboard.csv by the current code, and the page
  quotes it verbatim (after its title);
- every mean ± interval the page's own prose quotes (the paper comparison) is a cell of
  results/catalog/leaderboard.md;
- the paper comparison is results/catalog/claims.md verbatim;
- the README's sentence is rendered from the same leaderboard (`lenbench.report.findings.rank_one`).
"""

import re

import pandas as pd
import pytest
from docs_markdown import DOCS, ROOT, block

from lenbench.report.findings import findings_markdown, rank_one

pytestmark = pytest.mark.docs

CATALOG = ROOT / "results" / "catalog"
PAGE = DOCS / "catalog.md"
published = pytest.mark.skipif(not (CATALOG / "leaderboard.csv").is_file(), reason="results/catalog/ is not published")


def board() -> pd.DataFrame:
    return pd.read_csv(CATALOG / "leaderboard.csv", keep_default_na=False, na_values=[""])


@published
def test_findings_md_is_the_leaderboard_rendered_by_the_current_code():
    assert (CATALOG / "findings.md").read_text() == findings_markdown(board()), \
        "results/catalog/findings.md is stale: rerun `lenbench report results/catalog`"


@published
def test_the_page_quotes_the_findings_verbatim():
    findings = (CATALOG / "findings.md").read_text().split("\n", 2)[2].strip()  # after "# What the board shows"
    assert findings in PAGE.read_text(), "docs/catalog.md's findings differ from results/catalog/findings.md: paste them"


@published
def test_every_number_the_page_quotes_is_on_the_board():
    text = PAGE.read_text()
    findings = (CATALOG / "findings.md").read_text().split("\n", 2)[2].strip()
    prose = " ".join(text.replace(findings, "").split())
    quoted = re.findall(r"\d+\.\d{3} ± \d+\.\d{3}", prose)
    assert len(quoted) >= 10, "the paper comparison quotes the board's numbers (mean ± half-width)"
    table = (CATALOG / "leaderboard.md").read_text()
    missing = [q for q in quoted if q not in table]
    assert not missing, f"docs/catalog.md quotes numbers results/catalog/leaderboard.md does not hold: {missing}"


@published
def test_the_paper_comparison_is_the_published_claims_verbatim():
    """The page quotes results/catalog/claims.md (the claims judged by the board's own paired test,
    `lenbench.report.claims`) after its title and intro."""
    claims = (CATALOG / "claims.md").read_text()
    bullets = claims[claims.index("\n- "):]
    assert block(PAGE.read_text(), "claims", "results/catalog/claims.md verbatim") == " ".join(bullets.split()), \
        "docs/catalog.md's paper comparison differs from results/catalog/claims.md: paste its bullets"


def summary_sentence(long: pd.DataFrame) -> str:
    """The README's sentence on the catalog, rendered from its leaderboard: per task (most learned
    first) how many trained encodings learned it at 1× and its rank 1 past the training length, or
    that the ranked entries are not separated (every one shares rank 1)."""
    leaders = rank_one(long)
    models = long[(long["kind"] == "model") & (long["statistic"] == "rank") & (long["task"] != "overall")]
    models = models[models["metric"] == models.groupby("task")["metric"].transform("first")]
    learned = models.groupby("task")["learnability"].apply(lambda s: int((s == "learned").sum()))
    ranked = models.groupby("task")["value"].apply(lambda s: int(s.notna().sum()))
    total = models.groupby("task").size()
    by = long.groupby("task")["ranked_by"].first()
    primary = long.groupby("task")["metric"].first()
    order = sorted(leaders, key=lambda t: (-learned[t], t))

    def says(t: str) -> str:
        head = f"{t} ({learned[t]} of {total[t]} learned, {ranked[t]} ranked" + \
            (f", by {by[t].replace('_', ' ')}" if by[t] != primary[t] else "") + ")"
        if len(leaders[t]) == ranked[t]:
            return f"{head}: none separated"
        return f"{head}: {', '.join(leaders[t])}"

    shown = [says(t) for t in order if leaders[t]]
    unranked = [t for t in order if not leaders[t]]
    text = f"rank 1 past the training length, by task: {'; '.join(shown)}."
    if unranked:
        listed = unranked[0] if len(unranked) == 1 else f"{', '.join(unranked[:-1])} and {unranked[-1]}"
        text += (f" On {listed} fewer than two encodings are ranked (learned at 1× with support, complete and above "
                 "the best trivial baseline past the training length).")
    return text


@published
def test_the_readme_summarises_the_catalog():
    readme = (ROOT / "README.md").read_text()
    want = summary_sentence(board())
    assert block(readme, "catalog-summary", "results/catalog/leaderboard.csv") == want, want
