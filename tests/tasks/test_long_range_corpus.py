"""The `lm` task's long-range corpus: whole documents of three kinds, held out by document, every
evaluation window inside one held-out document and scoring the same bytes at every length."""

from __future__ import annotations

import pytest
import torch

from lenbench.tasks import build_task
from lenbench.tasks.corpora import HELD_OUT, KINDS, long_range_documents


@pytest.fixture(scope="module")
def task():
    return build_task("lm", source="long-range")


def test_every_kind_has_training_and_held_out_documents_and_several_megabytes():
    docs = long_range_documents()
    assert sum(len(d.data) for d in docs) > 3_000_000
    for kind in KINDS:
        own = [d for d in docs if d.kind == kind]
        held = [d for d in own if d.held_out]
        assert held and len(held) < len(own), kind
        assert len({d.name for d in own}) == len(own)
    share = sum(d.held_out for d in docs) / len(docs)
    assert abs(share - HELD_OUT) < 0.06


def test_the_corpus_lays_out_training_then_held_out_documents_and_names_its_bytes(task):
    corpus = task.corpus
    docs = long_range_documents()
    train = b"".join(d.data for d in docs if not d.held_out)
    assert corpus.train_size == len(train) and bytes(corpus.data[:1000].tolist()) == train[:1000]
    held = [d for d in docs if d.held_out]
    assert [(KINDS[k], e - s) for k, s, e in corpus.held_out] == [(d.kind, len(d.data)) for d in held]
    for (_, s, _e), d in zip(corpus.held_out, held, strict=True):
        assert bytes(corpus.data[s:s + 64].tolist()) == d.data[:64]
    assert task.fingerprint()["corpus_sha256"] == corpus.sha256 and len(corpus.sha256) == 64


def test_an_evaluation_window_lies_in_one_held_out_document_with_the_same_targets_at_every_length(task):
    spans = task.corpus.held_out
    kinds = []
    ends = {}
    for n in (64, 256, 1024):
        batch = task.sample(512, n, torch.Generator().manual_seed(7), split="eval")
        ends[n] = batch.targets[:, -32:]
        starts = task._held_out_ends(512, n, torch.Generator().manual_seed(7))[:, 0] - n  # the window's first input
        for start in starts.tolist():
            doc = next(i for i, (_, s, e) in enumerate(spans) if s <= start < e)
            _, s, e = spans[doc]
            assert s <= start and start + n + 1 <= e  # inside the document, its last byte ≥ context from its start
            assert start + n - s >= task.context
            if n == 64:
                kinds.append(spans[doc][0])
    assert torch.equal(ends[64], ends[256]) and torch.equal(ends[64], ends[1024])  # the same scored bytes
    shares = torch.bincount(torch.tensor(kinds), minlength=len(KINDS)).float() / len(kinds)
    assert (shares - 1 / len(KINDS)).abs().max() < 0.08  # the kind is drawn uniformly


def test_a_length_past_its_context_and_bad_parameters_are_one_line_errors(task):
    with pytest.raises(ValueError, match=r"eval length 2048 exceeds context=1024.*pass context >= 2048"):
        task.sample(2, 2048, torch.Generator().manual_seed(0), split="eval")
    with pytest.raises(ValueError, match="train_len 2048 exceeds context=1024"):
        task.check_train_len(2048)
    with pytest.raises(ValueError, match="parameter source must be one of stdlib, long-range, got 'pile'"):
        build_task("lm", source="pile")
    with pytest.raises(ValueError, match="pass either path= or source='long-range', not both"):
        build_task("lm", source="long-range", path=__file__)
    assert build_task("lm", source="long-range", context=4096).context == 4096
