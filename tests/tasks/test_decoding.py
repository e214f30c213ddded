"""Generated answers (`lenbench.tasks.decoding`): the fixed-point iteration against token-by-token
greedy decoding, the answers each task feeds back, and what generation takes from a shortcut."""

from __future__ import annotations

import pytest
import torch

from lenbench.baselines import baselines_for
from lenbench.evaluate import evaluate_length, sample_sums
from lenbench.metrics import metric_transform
from lenbench.model import ModelConfig, Transformer
from lenbench.tasks import build_task
from lenbench.tasks.decoding import HeldDraws, generate

#: (task, params, length, the answer is fed back token by token): every layout of answers the tasks write.
LAYOUTS = [
    ("copy", {}, 6, True), ("reverse", {}, 5, True), ("sort", {}, 7, True), ("addition", {}, 3, True),
    ("passkey", {}, 30, True),
    ("recall", {"queries": 3}, 5, True),  # each answer follows its query and precedes the next query
    ("recall", {"queries": "all", "distinct_values": True, "feed_answers": False, "num_values": 16}, 5, False),
    ("parity", {}, 6, False), ("count", {}, 6, False),  # one answer token: nothing to feed back
    ("mqar", {}, 5, False),  # Zoology's layout by default: each answer predicted at its query
]


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def sequential_greedy(predict, batch) -> torch.Tensor:
    """Greedy decoding written the slow, obvious way: for each fed-back position in order, one
    forward on the inputs so far, its prediction written into that position."""
    inputs = batch.inputs.clone()
    fed = batch.fed_back
    for t in range(1, inputs.shape[1]):
        rows = fed[:, t]
        if rows.any():
            inputs[rows, t] = predict(inputs[rows])[:, t - 1]
    return predict(inputs)


@pytest.mark.parametrize("name,params,length,feeds", LAYOUTS, ids=lambda v: str(v))
def test_fed_back_marks_exactly_the_answers_that_are_inputs(name, params, length, feeds):
    task = build_task(name, **params)
    batch = task.sample(8, length, gen(1), split="eval")
    fed = batch.fed_back
    assert not fed[:, 0].any() and bool(fed.any()) == feeds
    assert torch.equal(batch.inputs[:, 1:][fed[:, 1:]], batch.targets[:, :-1][fed[:, 1:]])
    assert torch.equal(fed[:, 1:], batch.loss_mask[:, :-1] & fed[:, 1:])  # only after a scored position
    if feeds:  # every scored token but the last answer's is the next input
        assert int(fed.sum()) == int(batch.loss_mask[:, :-1].sum())


@pytest.mark.parametrize("encoding", ["rope", "alibi", "nope", "fox", "cope"])
@pytest.mark.parametrize("name,params,length,feeds", LAYOUTS[:6], ids=lambda v: str(v))
def test_the_fixed_point_is_token_by_token_greedy_decoding(encoding, name, params, length, feeds):
    torch.manual_seed(0)
    task = build_task(name, **params)
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=32, n_heads=2, encoding=encoding,
                                    max_len=task.seq_len(length))).eval()
    predict = lambda x: model(x).argmax(-1)  # noqa: E731
    batch = task.sample(6, length, gen(2), split="eval")
    with torch.no_grad():
        decoded = generate(predict, batch)
        reference = sequential_greedy(predict, batch)
    mask = batch.loss_mask
    assert torch.equal(decoded.generated[mask], reference[mask])
    assert (decoded.generated[mask] != decoded.teacher_forced[mask]).any()  # generation changed something
    assert decoded.forwards <= int(batch.fed_back.sum(1).max()) + 1
    assert torch.equal(decoded.teacher_forced, predict(batch.inputs))


def test_a_model_right_under_teacher_forcing_costs_no_extra_forward():
    task = build_task("copy")
    batch = task.sample(5, 6, gen(3))
    oracle = lambda x: torch.where(batch.loss_mask, batch.targets, x)  # noqa: E731 (right wherever scored)
    decoded = generate(oracle, batch)
    assert decoded.forwards == 0 and torch.equal(decoded.generated[batch.loss_mask], batch.targets[batch.loss_mask])


def test_an_iteration_that_never_settles_is_an_error():
    task = build_task("copy")
    batch = task.sample(2, 4, gen(0))
    with pytest.raises(RuntimeError, match="did not settle after 8 forwards on 3 fed-back positions; is the model causal"):
        generate(lambda x: (x.roll(-1, dims=1) + 1) % task.vocab_size, batch)  # reads the next position


def test_repeat_previous_loses_its_teacher_forced_shortcut_on_sort():
    """Copying the token just read scores on sort under teacher forcing (a sorted answer repeats
    items) and nothing when generating (it copies the separator, then itself)."""
    task = build_task("sort")
    batch = task.sample(256, 32, gen(4), split="eval")  # 32 items of 8 values: most repeat their predecessor
    (repeat,) = [b for b in baselines_for("sequence") if b.name == "repeat-previous"]
    sums = repeat.scores(task, batch)
    value = {m: metric_transform(m, sum(n) / sum(d)) for m, (n, d) in sums.items()}
    seq = torch.cat([batch.inputs, batch.targets[:, -1:]], dim=1)  # (B, 65): the whole example
    answer, before = seq[:, 33:], seq[:, 32:-1]  # each answer token and the token before it (SEP first)
    assert value["tf_token_accuracy"] == pytest.approx((answer == before).double().mean().item(), abs=1e-12)
    assert value["tf_token_accuracy"] > 0.5
    assert value["token_accuracy"] == 0.0 and value["exact_match"] == 0.0


def test_generated_exact_match_is_teacher_forced_exact_match():
    task = build_task("copy")
    n = 4
    batch = task.sample(400, n, gen(5), split="eval")

    def predict(x):  # causal: position t copies item t - n, unless a hash of x[:t+1] says to err
        right = torch.cat([x[:, :1].expand(-1, n), x[:, : x.shape[1] - n]], dim=1)  # (B, T): x[t - n]
        err = (x * 31 + 7).cumsum(1) % 5 == 0  # (B, T): about 1 in 5
        return torch.where(err, (right + 1) % task.vocab, right)

    decoded = generate(predict, batch)
    mask = batch.loss_mask
    forced = ((decoded.teacher_forced == batch.targets) | ~mask).all(1)
    generated = ((decoded.generated == batch.targets) | ~mask).all(1)
    assert torch.equal(forced, generated) and 0 < int(generated.sum()) < 400
    sums = sample_sums(decoded.generated == batch.targets, None, mask, decoded.teacher_forced == batch.targets)
    assert sums["token_accuracy"] != sums["tf_token_accuracy"]  # they differ past the first wrong token


def test_evaluation_scores_generated_answers_and_keeps_teacher_forcing_as_a_diagnostic():
    torch.manual_seed(2)
    task = build_task("copy", vocab=4)
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=32, n_heads=2, encoding="rope")).eval()
    values, n, scores = evaluate_length(model, task, 5, samples=40, tokens_per_batch=100, seed=0, device=torch.device("cpu"))
    assert n == 40 and set(values) == {"exact_match", "token_accuracy", "tf_token_accuracy"}
    batch = task.sample(40, 5, torch.Generator().manual_seed(0))  # not the evaluation's examples: a bound only
    assert batch.inputs.shape == (40, 10)
    for metric in ("token_accuracy", "tf_token_accuracy"):
        num, den = (list(map(float, part)) for part in zip(*(e.split("/") for e in scores[metric].split()), strict=True))
        assert values[metric] == pytest.approx(sum(num) / sum(den))


def _randomized_model(task, length: int) -> Transformer:
    torch.manual_seed(3)  # randomized RoPE, positions drawn from [0, 64) on every forward (the paper's evaluation)
    return Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=32, n_heads=2, encoding="randomized",
                                   encoding_params={"max_position": 64}, max_len=task.seq_len(length))).eval()


@torch.no_grad()
def test_a_model_that_draws_at_evaluation_decodes_greedily_under_its_first_forwards_draw():
    task = build_task("copy")
    batch = task.sample(6, 5, gen(6), split="eval")
    model = _randomized_model(task, 5)
    torch.manual_seed(7)
    first = model(batch.inputs)
    assert not torch.equal(first, model(batch.inputs))  # the premise: two forwards, two draws
    after_one_forward = (torch.manual_seed(7), model(batch.inputs), torch.get_rng_state())[2]

    def under_the_draw(x):  # the reference: every forward from the seed-7 state, so under one draw
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            return model(x).argmax(-1)

    reference = sequential_greedy(under_the_draw, batch)
    torch.manual_seed(7)
    forward = HeldDraws(lambda x: model(x), torch.device("cpu"))
    decoded = generate(lambda x: forward(x).argmax(-1), batch)
    mask = batch.loss_mask
    assert torch.equal(decoded.generated[mask], reference[mask]) and decoded.forwards > 0
    assert torch.equal(decoded.teacher_forced, first.argmax(-1))
    assert torch.equal(torch.get_rng_state(), after_one_forward)  # the stream moved by one forward's draw


@torch.no_grad()
def test_held_draws_leave_a_model_that_draws_nothing_bit_for_bit():
    task = build_task("sort")
    batch = task.sample(6, 6, gen(8), split="eval")
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=32, n_heads=2, encoding="rope",
                                    max_len=task.seq_len(6))).eval()
    torch.manual_seed(9)
    plain = generate(lambda x: model(x).argmax(-1), batch)
    state = torch.get_rng_state()
    torch.manual_seed(9)
    forward = HeldDraws(lambda x: model(x), torch.device("cpu"))
    held = generate(lambda x: forward(x).argmax(-1), batch)
    assert torch.equal(held.generated, plain.generated) and held.forwards == plain.forwards > 0
    assert torch.equal(torch.get_rng_state(), state)


def test_evaluation_of_a_model_that_draws_settles_and_repeats_under_its_seed():
    task = build_task("reverse")
    model = _randomized_model(task, 12)  # an untrained model: near-tied logits that a new draw would flip
    runs = []
    for _ in range(2):
        torch.manual_seed(11)
        runs.append(evaluate_length(model, task, 12, samples=24, tokens_per_batch=200, seed=0,
                                    device=torch.device("cpu")))
    assert runs[0] == runs[1] and runs[0][1] == 24
