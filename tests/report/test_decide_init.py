"""studies/protocol/decide_init.py: issue 42's initialisation rule, applied as written in
studies/protocol/README.md (fewest tasks under the quorum, then most learned pairs, then the first arm)."""

from pathlib import Path

from lenbench_testing import load_script

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "studies" / "protocol" / "decide_init.py"
decide_init = load_script(STUDY)
decide = decide_init.decide


def test_the_arm_with_fewer_tasks_under_the_quorum_wins_whatever_its_learned_pairs():
    arms = {"a": {"copy": (8, 8), "mqar": (3, 8), "sort": (8, 8)},  # 1 task under, 19 pairs
            "b": {"copy": (4, 8), "mqar": (4, 8), "sort": (4, 8)}}  # 0 under (4 of 8 is half), 12 pairs
    assert decide(arms)[0] == "b"


def test_a_tie_on_tasks_goes_to_more_learned_pairs_then_to_the_first_arm():
    assert decide({"a": {"copy": (3, 8), "sort": (6, 8)}, "b": {"copy": (8, 8), "sort": (2, 8)}})[0] == "b"
    assert decide({"a": {"copy": (3, 8), "sort": (6, 8)}, "b": {"copy": (6, 8), "sort": (3, 8)}})[0] == "a"
    assert decide({"b": {"copy": (6, 8), "sort": (3, 8)}, "a": {"copy": (3, 8), "sort": (6, 8)}})[0] == "b"


def test_a_task_an_arm_lacks_or_holds_for_fewer_than_the_core_8_leaves_it_undecided():
    winner, why = decide({"a": {"copy": (8, 8), "sort": (8, 8)}, "b": {"copy": (8, 8), "sort": (1, 3)}})
    assert winner is None and why == "not measured: sort (b: 3 of 8)"
    winner, why = decide({"a": {"copy": (8, 8), "lm": (8, 8)}, "b": {"copy": (8, 8)}})
    assert winner is None and why == "not measured: lm (b)"


def test_a_labelled_entry_is_read_as_the_task_it_names():
    source = ROOT / "studies" / "protocol" / "calibration-patience"
    rows = decide_init.arm_rows([f"{source}:mqar_init1=mqar"])
    assert set(rows["task"]) == {"mqar"}
    assert set(rows["cell_id"]) == set(decide_init.arm_rows([str(source)]).query("task == 'mqar_init1'")["cell_id"])
