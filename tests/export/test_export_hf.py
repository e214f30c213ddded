"""`lenbench export hf`: each series' model card, round-tripped through huggingface_hub offline
(`ModelCard`, `ModelCardData`, `model_index_to_eval_results`)."""

import math

import pytest
from export_rows import tiny_rows

from lenbench.report.tables import leaderboard

hub = pytest.importorskip("huggingface_hub", reason="the hf extra is not installed (pip install 'lenbench[hf]')")
from huggingface_hub.repocard_data import model_index_to_eval_results  # noqa: E402

from lenbench.export import hf  # noqa: E402


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf")
    lines = hf.export_hf(tiny_rows(), out)
    return out, lines


def test_one_card_per_trained_series_and_none_for_baselines(cards):
    out, lines = cards
    assert sorted(p.parent.name for p in out.glob("*/README.md")) == ["alibi", "rope", "rope+yarn"]
    assert lines[0].startswith("wrote 3 model card(s)")


def test_the_card_round_trips_through_huggingface_hub(cards):
    out, _ = cards
    board = leaderboard(tiny_rows())
    long = board.long()
    for path in out.glob("*/README.md"):
        card = hub.ModelCard.load(path)
        series = path.parent.name
        assert card.data.model_name == series
        name, results = model_index_to_eval_results(card.data.to_dict()["model-index"])
        assert name == series and len(results) == len(card.data.eval_results) > 0
        again = hub.ModelCardData(model_name=series, eval_results=results).to_dict()["model-index"]
        assert again == card.data.to_dict()["model-index"]
        mine = long[(long["series"] == series) & (long["task"] != "overall")]
        stats = {f"{r.metric} {r.statistic}": r for r in mine.itertuples() if math.isfinite(r.value)}
        by_name = {r.metric_name: r for r in results}
        for key, row in stats.items():
            assert by_name[key].metric_value == pytest.approx(row.value)
            assert by_name[key].dataset_type == f"lenbench/{row.task}" and by_name[key].verified is False
            if math.isfinite(row.ci_low):
                assert by_name[key].metric_args["ci_low"] == pytest.approx(row.ci_low)


def test_each_ratio_of_the_primary_metric_is_a_metric(cards):
    out, _ = cards
    wide = leaderboard(tiny_rows()).wide
    rope = wide[(wide["series"] == "rope") & (wide["kind"] == "model")].iloc[0]
    results = hub.ModelCard.load(out / "rope" / "README.md").data.eval_results
    at = {r.metric_config: r for r in results if r.metric_name.startswith(f"{rope.metric} at ")}
    for col in ("1x", "2x"):
        assert at[col].metric_value == pytest.approx(rope[col]) and at[col].metric_args["ratio"] == float(col[:-1])


def test_a_missing_out_is_one_line():
    with pytest.raises(ValueError, match=r"^lenbench export hf needs --out DIR"):
        hf.export_hf(tiny_rows(), None)
