"""The README: short, and every number in it comes from a file these tests read.

- its size (≤ 200 lines, hard-wrapped at 110 characters) and the two quick-start commands;
- the measurement sentences, rendered from docs/measurements/*.json (the README's and getting
  started's copies);
- the headline leaderboard table and its caveat, recomputed from results/leaderboard.csv and the
  published cells' configs (an independent reading of the CSV, not the report's own formatting);
- its links: every docs page of the nav, and only files that exist.
"""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from docs_markdown import DOCS, README, ROOT, block, marker_keys, nav_pages, table_after

from lenbench.report.stats import AREA, past_area_weights

pytestmark = pytest.mark.docs

RESULTS = ROOT / "results"
MEASUREMENTS = DOCS / "measurements"
MAIN_COMMAND = "pytest bench --benchmark-json runs/bench.json"
TEST_COMMAND = "python -m pytest tests -n 2"


def readme() -> str:
    return README.read_text()


def test_readme_is_short_and_hard_wrapped():
    lines = readme().split("\n")
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; keep it ≤ 200 (move detail into docs/)"
    long = [i for i, line in enumerate(lines, 1) if len(line) > 110]
    assert not long, f"README.md lines over 110 characters (rewrap them): {long}"


def test_quick_start_commands_are_the_main_and_test_commands():
    """Each command on a line of its own, as .ci/run and tests/test_publish.py run them."""
    lines = [line.strip() for line in readme().split("\n")]
    assert MAIN_COMMAND in lines and TEST_COMMAND in lines
    ci = (ROOT / ".ci" / "run").read_text().split("\n")
    assert TEST_COMMAND in [line.strip() for line in ci], ".ci/run must run exactly the README's test command"



def test_ci_runs_the_test_command_in_the_readmes_virtual_environment():
    """.ci/run makes the README's venv (`python -m venv .venv`, activated) and installs lenbench into it
    editable before the test command, so what CI passes is the README's install, not the system's."""
    install = [line.strip() for line in block_of(readme(), "## Install").split("\n")]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().split("\n")]
    assert "python -m venv .venv && . .venv/bin/activate" in install and 'pip install -e ".[dev]"' in install
    steps = ["python -m venv .venv", ". .venv/bin/activate", TEST_COMMAND]
    at = [ci.index(step) for step in steps]
    assert at == sorted(at), f".ci/run must make and activate .venv before the test command: {steps}"
    editable = [i for i, line in enumerate(ci) if re.fullmatch(r'python -m pip install --quiet -e "\.\[dev[^"]*\]"', line)]
    assert editable and at[1] < editable[0] < at[2], ".ci/run must install lenbench editable with its dev extra into .venv"


def block_of(text: str, heading: str) -> str:
    """The section of a markdown text under `heading`, up to the next heading of the same level."""
    level = heading.split()[0]
    body = text.split(heading + "\n", 1)[1]
    return re.split(rf"^{level} ", body, maxsplit=1, flags=re.M)[0]

# --- measurements -------------------------------------------------------------------------------

#: Keys every measurement file has (null until measured, except command / what / note).
MEASUREMENT_KEYS = {"command", "what", "measured_with", "wall_seconds", "max_rss_gb", "machine", "date",
                    "lenbench_commit", "predates_current_code", "note"}


def measurements() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(MEASUREMENTS.glob("*.json"))}


def render(name: str, m: dict, link: str) -> str:
    """The sentence a page states for measurement file `name` (`link`: its path from that page)."""
    target = f"[{link}]({link})"
    if m["wall_seconds"] is None:
        return f"`{m['command']}` has not been measured yet ({target})."
    minutes, seconds = divmod(round(m["wall_seconds"]), 60)
    machine = m["machine"]
    text = (f"Measured (`{m['measured_with']}`, {target}): on a {machine['cpu_count']}-core {machine['cpu']} CPU "
            f"machine ({machine['os']}, Python {machine['python']}, torch {machine['torch']}), "
            f"{machine['conditions']}, `{m['command']}` took {minutes} min {seconds} s wall and "
            f"{m['max_rss_gb']:g} GB peak memory (max RSS), on {m['date']} at lenbench commit "
            f"{m['lenbench_commit'][:7]}.")
    if m["predates_current_code"]:
        text += " That predates the current code and is re-measured by the maintainers."
    return text


def test_measurement_files_are_complete():
    found = measurements()
    assert {"main-command.json", "test-command.json"} <= set(found)
    commands = {m["command"] for m in found.values()}
    assert {MAIN_COMMAND, TEST_COMMAND} <= commands
    for name, m in found.items():
        assert MEASUREMENT_KEYS <= set(m), f"docs/measurements/{name} lacks {sorted(MEASUREMENT_KEYS - set(m))}"
        if m["wall_seconds"] is not None:
            assert m["wall_seconds"] > 0 and m["max_rss_gb"] > 0
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", m["date"]) and re.fullmatch(r"[0-9a-f]{40}", m["lenbench_commit"])
            assert {"cpu", "cpu_count", "os", "python", "torch", "conditions"} <= set(m["machine"])
            if m["predates_current_code"]:
                assert "PREDATES" in m["note"], f"docs/measurements/{name}: say in its note that it predates the code"


@pytest.mark.parametrize("page, prefix", [("README.md", "docs/measurements/"),
                                          ("docs/getting-started.md", "measurements/")])
def test_measurement_sentences_follow_the_files(page, prefix):
    text = (ROOT / page).read_text()
    found = measurements()
    quoted = marker_keys(text, "measurement")
    assert sorted(quoted) == sorted(found), f"{page} quotes measurements {quoted}, the files are {sorted(found)}"
    for name, m in found.items():
        want = render(name, m, prefix + name)
        assert block(text, "measurement", name) == want, \
            f"{page}: the sentence of docs/measurements/{name} is stale; write between its markers:\n{want}"


def test_main_command_measurement_is_the_one_the_brief_quotes():
    """14 min 31 s, 8.6 GB: the figure the README published before this file existed (c7c42b2)."""
    m = measurements()["main-command.json"]
    if not m["predates_current_code"]:
        pytest.skip("re-measured: the file no longer holds the transcribed figure")
    assert (m["wall_seconds"], m["max_rss_gb"]) == (14 * 60 + 31, 8.6)


# --- the headline table -------------------------------------------------------------------------

def leaderboard():
    import pandas as pd

    return pd.read_csv(RESULTS / "leaderboard.csv")


def _ci(row) -> str:
    return f"{row['value']:.3f} ± {(row['ci_high'] - row['ci_low']) / 2:.3f}"


def expected_headline(board) -> list[dict[str, str]]:
    """Rows of the headline, computed from a leaderboard.csv frame: the overall ranking, with each
    encoding's ranked statistic on lm (the degradation) and passkey (the area past train) (n/l where not learned, ? where
    uncertain)."""
    overall = board[(board["task"] == "overall") & (board["statistic"] == "rank")]
    ranks = list(overall["value"])
    models = board[(board["kind"] == "model") & (board["variant"] == "none")]
    on = models.groupby("task")["ranked_on"].first() if "ranked_on" in models else {}
    past = models[models["statistic"] == models["task"].map(lambda t: on.get(t, AREA) or AREA)]
    rows = []
    for r in overall.to_dict("records"):
        shared = ranks.count(r["value"]) > 1
        row = {"rank": ("=" if shared else "") + f"{r['value']:g}", "encoding": r["encoding"]}
        for task, metric, column in (("lm", "perplexity", "lm degradation (nats) ↓"),
                                     ("passkey", "exact_match", "passkey exact match past train ↑")):
            cell = past[(past["task"] == task) & (past["metric"] == metric) & (past["encoding"] == r["encoding"])]
            assert len(cell) == 1, (task, r["encoding"])
            cell = cell.iloc[0]
            verdict = str(cell.get("learnability", "learned" if not cell["not_learned"] else "not learned"))
            row[column] = {"not learned": "n/l", "uncertain": "?"}.get(verdict, _ci(cell))
        row["boards counted"] = str(int(r["n"]))
        rows.append(row)
    return rows


@pytest.mark.skipif(not (RESULTS / "leaderboard.csv").exists(), reason="no published results/leaderboard.csv")
def test_headline_table_is_the_published_leaderboard():
    table = table_after(readme(), "<!-- headline: checked against results/leaderboard.csv and results/cells/ by "
                                  "tests/docs/test_readme.py -->")
    want = expected_headline(leaderboard())
    assert table == want, "the README's headline differs from results/leaderboard.csv; its rows should be:\n" + \
        "\n".join("| " + " | ".join(r.values()) + " |" for r in want)


def test_the_headline_reader_reads_the_csv():
    """The reader above, on a hand-made leaderboard: half-widths, shared ranks, not learned."""
    import pandas as pd

    row = {"kind": "model", "variant": "none", "statistic": AREA, "ci_low": 0.0, "ci_high": 0.5,
           "not_learned": False, "n": 3}
    frame = pd.DataFrame([
        {**row, "task": "overall", "encoding": "a", "statistic": "rank", "value": 1.0, "n": 2},
        {**row, "task": "overall", "encoding": "b", "statistic": "rank", "value": 1.0, "n": 1},
        {**row, "task": "lm", "metric": "perplexity", "encoding": "a", "value": 2.0, "ci_low": 1.5, "ci_high": 2.7},
        {**row, "task": "lm", "metric": "bits_per_byte", "encoding": "a", "value": 1.0},  # a secondary's row
        {**row, "task": "lm", "metric": "perplexity", "encoding": "b", "value": 3.0},
        {**row, "task": "passkey", "metric": "exact_match", "encoding": "a", "value": 0.25},
        {**row, "task": "passkey", "metric": "exact_match", "encoding": "b", "value": 0.0, "not_learned": True,
         "learnability": "uncertain"},
    ])
    rows = expected_headline(frame)
    assert [r["rank"] for r in rows] == ["=1", "=1"]
    assert rows[0]["lm degradation (nats) ↓"] == "2.000 ± 0.600"
    assert rows[1]["passkey exact match past train ↑"] == "?"
    assert [r["boards counted"] for r in rows] == ["2", "1"]


def published_config() -> dict:
    """The settings of the published cells: the model and seeds every cell shares, each task's
    training length, steps and evaluation settings (a suite's per-task overrides may differ)."""
    configs = [json.loads(p.read_text())["config"] for p in sorted((RESULTS / "cells").glob("*.json"))]
    assert configs, "results/cells/ holds no cell"
    models = {json.dumps(c["model"], sort_keys=True) for c in configs}
    assert len(models) == 1, "the published cells differ in model: the README's caveat names one setting"
    shared = {"model": json.loads(models.pop())}
    shared["seeds"] = sorted({c["seed"] for c in configs})
    for key, field in (("train_len", None), ("steps", "train"), ("ratios", "eval")):
        by_task = {}
        for c in configs:
            value = c["train_len"] if field is None else c[field][key]
            by_task.setdefault(c["task"], set()).add(json.dumps(value))
        assert all(len(v) == 1 for v in by_task.values()), f"a task's published cells differ in {key}"
        shared[key] = {task: json.loads(v.pop()) for task, v in by_task.items()}
    return shared


def steps_phrase(steps: dict[str, int], order: list[str]) -> str:
    """"2000 (sort) and 1000 (passkey, lm) steps", or "1000 steps" when every task trains as long."""
    groups: dict[int, list[str]] = {}
    for task in order:
        groups.setdefault(steps[task], []).append(task)
    if len(groups) == 1:
        return f"{next(iter(groups))} steps"
    parts = [f"{n} ({', '.join(tasks)})" for n, tasks in groups.items()]
    return f"{', '.join(parts[:-1])} and {parts[-1]} steps"


def ratios_phrase(ratios: list[float]) -> str:
    """How the caveat names an evaluation axis: each ratio past 1× with its weight in the area past train
    ("2×, 4×, 8× and 16× weighted 0.375, 0.25, 0.25 and 0.125"), or, for a dense axis (more than five
    ratios past 1×), its evenly spaced run and the ratios after it ("every length from 1.125× to 2× and
    3×, 4× and 8×")."""
    past = [r for r in ratios if r > 1]
    assert len(past) > 1, "the caveat's axis needs at least two ratios past 1x"

    def listed(rs: list[float]) -> str:
        return f"{', '.join(f'{r:g}×' for r in rs[:-1])} and {rs[-1]:g}×" if len(rs) > 1 else f"{rs[0]:g}×"

    if len(past) <= 5:
        weights = [w for w in past_area_weights(np.array(ratios, dtype=float)) if w > 0]
        return f"{listed(past)} weighted {', '.join(f'{w:g}' for w in weights[:-1])} and {weights[-1]:g}"
    step, end = past[1] - past[0], 1
    while end < len(past) and math.isclose(past[end] - past[end - 1], step):
        end += 1
    rest = past[end:]
    return f"every length from {past[0]:g}× to {past[end - 1]:g}×" + (f" and {listed(rest)}" if rest else "")


def test_ratios_phrase():
    assert ratios_phrase([1, 2, 4, 8, 16]) == "2×, 4×, 8× and 16× weighted 0.375, 0.25, 0.25 and 0.125"
    dense = [1, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875, 2.0, 3, 4, 8]
    assert ratios_phrase(dense) == "every length from 1.125× to 2× and 3×, 4× and 8×"
    assert ratios_phrase([1, 1.5, 2, 2.5, 3, 3.5, 4]) == "every length from 1.5× to 4×"


def test_steps_phrase():
    assert steps_phrase({"a": 5, "b": 5}, ["a", "b"]) == "5 steps"
    assert steps_phrase({"s": 2000, "p": 1000, "l": 1000}, ["s", "p", "l"]) == "2000 (s) and 1000 (p, l) steps"


@pytest.mark.skipif(not (RESULTS / "cells").is_dir(), reason="no published results/cells/")
def test_headline_caveat_states_the_published_scale():
    text = block(readme(), "headline", "checked against results/leaderboard.csv and results/cells/ by "
                                       "tests/docs/test_readme.py")
    c = published_config()
    from lenbench.config import load_suite
    from lenbench.tasks import TASKS

    order = [t.name for t in load_suite("quick").tasks]
    assert sorted(order) == sorted(c["train_len"]), "results/ holds other tasks than the quick suite"
    model = c["model"]
    assert f"{model['n_layers']}-layer, {model['d_model']}-wide models after {steps_phrase(c['steps'], order)}, " \
           f"{len(c['seeds'])} seeds" in " ".join(text.split())
    for ratios in {json.dumps(r) for r in c["ratios"].values()}:  # each evaluation axis the tasks use
        assert ratios_phrase(json.loads(ratios)) in " ".join(text.split()), ratios
    units = {"items": "items", "tokens": "tokens", "digits": "digits"}
    for task in order:
        unit = "bytes" if task == "lm" else units[TASKS.get(task).length_unit]  # lm's tokens are bytes
        assert f"{task} {c['train_len'][task]} {unit}" in " ".join(text.split()), task
    board = leaderboard()
    models = board[(board["kind"] == "model") & (board["statistic"] == "in_dist")]
    assert set(models["n"]) == {len(c["seeds"])}, "leaderboard.csv's seed counts differ from the cells'"
    for task in order:
        learned = not bool(models[models["task"] == task]["not_learned"].all())
        assert learned == (f"No encoding learns {task} at this budget" not in text), task


# --- links --------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def test_readme_links_every_docs_page_and_only_existing_files():
    text = readme()
    targets = [m.group(1) for m in LINK.finditer(text) if not m.group(1).startswith(("http://", "https://"))]
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links files that do not exist: {missing}"
    linked = {Path(t).as_posix() for t in targets}
    unlinked = [p for p in nav_pages() if f"docs/{p}" not in linked]
    assert not unlinked, f"README.md's Documentation list lacks links to: {unlinked}"
