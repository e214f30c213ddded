"""studies/protocol/copy_ambiguity.py: a cell's 1x samples are regenerated in the order its scores were
written, and each gets the ambiguous points of its answer in the order the answer is written."""

import json
from pathlib import Path

import pytest
from lenbench_testing import load_script

from lenbench.tasks import build_task
from lenbench.tasks.eval_data import eval_batches

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "studies" / "protocol" / "copy_ambiguity.py"
copy_ambiguity = load_script(STUDY)


def brute_force(answer: list[int]) -> int:
    """Positions j >= 1 where another occurrence of answer[j-1] is followed by something else."""
    return sum(any(answer[k] == answer[j - 1] and answer[k + 1] != answer[j] for k in range(len(answer) - 1))
               for j in range(1, len(answer)))


@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_failed_samples_carry_their_own_ambiguous_points(name, tmp_path):
    n, samples, seed = 6, 40, 2
    task = build_task(name)
    items = [s[:n] for b in eval_batches(task, n, samples=samples, tokens_per_batch=4096, seed=seed)
             for s in b.inputs.tolist()]
    answers = [s if name == "copy" else s[::-1] for s in items]
    points = [brute_force(a) for a in answers]
    assert len(set(points)) > 1, "the fixture needs samples that differ in ambiguity"
    scores = ["0" if p >= 2 else "1" for p in points]  # the model "fails" exactly the ambiguous samples
    row = {"ratio": 1, "variant": "none", "metric": "exact_match", "encoding": "alibi", "eval_len": n,
           "n_samples": samples, "sample_scores": " ".join(scores)}
    baseline = {**row, "encoding": "baseline:chance", "sample_scores": " ".join("0" * samples)}
    cell = {"status": "ok", "rows": [row, baseline],
            "config": {"task": name, "task_params": {}, "seed": seed, "label": "alibi",
                       "eval": {"tokens_per_batch": 4096}}}
    (tmp_path / "a.json").write_text(json.dumps(cell))
    got = copy_ambiguity.samples(tmp_path, name)
    assert got == {"alibi": [(p, p >= 2) for p in points]}
