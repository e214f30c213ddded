"""The measurement protocol (issue 11): variable-length training, length-relative encoding defaults,
realistic RoPE factors, context gain, needle depth and Hugging Face rope dicts."""

from __future__ import annotations

import math

import pytest
import torch
from lenbench_testing import CATALOG_DRAFT

from lenbench.config import TrainSpec, load_suite
from lenbench.model import ModelConfig, Transformer
from lenbench.tasks import TASKS, build_task
from lenbench.train import train_model

# --- 1. variable-length training ---------------------------------------------------------------

#: A training length per task just above its minimum, so the draw's lower end matters.
UNIFORM_LEN = {"passkey": 14, "recall": 4}


def test_every_task_declares_a_minimum_that_sample_accepts_and_one_below_it_fails():
    for name in TASKS.names():
        task = build_task(name)
        low = task.min_length
        batch = task.sample(2, low, torch.Generator().manual_seed(0))
        assert batch.inputs.shape == (2, task.seq_len(low)), name
        if low > 1:
            with pytest.raises(ValueError, match="too short"):
                task.sample(2, low - 1, torch.Generator().manual_seed(0))
    assert build_task("passkey").min_length == 11 and build_task("passkey", digits=2).min_length == 5


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TASKS.names()))
def test_uniform_sampling_trains_every_task_within_its_minimum_and_train_len(name, monkeypatch):
    task = build_task(name)
    train_len = UNIFORM_LEN.get(name, 5)
    drawn: list[int] = []
    original = type(task).sample

    def spy(self, batch_size, length, generator, split="train"):
        drawn.append(length)
        return original(self, batch_size, length, generator, split)

    monkeypatch.setattr(type(task), "sample", spy)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, ff_mult=2,
                                    encoding="rope", max_len=task.seq_len(train_len)))
    spec = TrainSpec(steps=40, batch_size=2, lr=1e-3, warmup=2, length_sampling="uniform")
    stats = train_model(model, task, train_len, spec, seed=0, device=torch.device("cpu"), progress=False)
    assert math.isfinite(stats.final_loss)
    assert len(drawn) == 40
    assert min(drawn) >= task.min_length and max(drawn) <= train_len
    assert min(drawn) == task.min_length and max(drawn) == train_len  # both ends reached in 40 draws
    assert len(set(drawn)) > 2


def test_uniform_sampling_below_the_task_minimum_is_a_one_line_error():
    task = build_task("passkey")
    model = Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, encoding="nope"))
    spec = TrainSpec(steps=2, batch_size=2, length_sampling="uniform")
    with pytest.raises(ValueError, match=r"train_len 8 is below the task's minimum length 11 tokens; raise train_len"):
        train_model(model, task, 8, spec, seed=0, device=torch.device("cpu"), progress=False)


def test_quick_and_standard_train_with_uniform_lengths():
    for name in ("quick", "standard"):
        assert load_suite(name).train.length_sampling == "uniform", name


# --- 2. length-relative defaults ---------------------------------------------------------------


def test_t5_max_distance_follows_the_training_length_and_fire_keeps_the_authors_threshold():
    from lenbench.encodings import EncodingDims, build_encoding

    for train_len, max_distance in ((32, 32), (64, 64), (2048, 2048), (8, 17)):
        dims = EncodingDims(d_model=32, n_heads=4, train_len=train_len)
        assert build_encoding("t5", dims).max_distance == max_distance  # 17: one past the 16 exact buckets
        # FIRE (issue 24): the authors' L0 = 512 at every length; a quarter of the training length only when asked
        assert build_encoding("fire", dims).threshold.item() == 512.0
        assert build_encoding("fire", dims, threshold_fraction=0.25).threshold.item() == max(1.0, train_len / 4)
    bidi = EncodingDims(d_model=32, n_heads=4, train_len=4, causal=False)
    assert build_encoding("t5", bidi).max_distance == 9  # one past 8 exact buckets per direction
    # the paper constants: by parameter, and when the training length is unknown
    dims = EncodingDims(d_model=32, n_heads=4, train_len=32)
    assert build_encoding("t5", dims, max_distance=128).max_distance == 128
    unknown = EncodingDims(d_model=32, n_heads=4)
    assert build_encoding("fire", unknown, threshold_fraction=0.25).threshold.item() == 512.0
    assert build_encoding("t5", unknown).max_distance == 128


def test_engine_builds_each_cell_model_with_its_training_length_in_tokens():
    from lenbench.config import parse_suite
    from lenbench.run.cell import model_config

    suite = parse_suite({"tasks": [{"name": "copy", "train_len": 16}, {"name": "addition", "train_len": 8}],
                         "encodings": ["fire", "t5", {"name": "fire", "params": {"threshold_fraction": 0.25},
                                                      "label": "fire-relthresh"}], "eval": {"ratios": [1, 2]}})
    for cell in suite.cells():
        task = build_task(cell.task.name)
        cfg = model_config(cell, task)
        assert cfg.train_len == task.seq_len(cell.train_len) == {"copy": 32, "addition": 26}[cell.task.name]
        model = Transformer(cfg)
        if cell.encoding.name == "t5":
            assert model.pos_enc.max_distance == cfg.train_len
        else:
            expected = cfg.train_len / 4 if cell.encoding.key == "fire-relthresh" else 512.0
            assert model.pos_enc.threshold.item() == expected


def test_the_protocol_presets_set_fire_xpos_and_randomized_relative_with_the_authors_values_labelled():
    """Issue 42, item 2: FIRE's threshold, xPos's scale base and randomized PE's L relative to the training
    length in the protocol's presets, the authors' absolute values as labelled entries; the main command's
    quick keeps the authors' FIRE (its published board's entry)."""
    relative = {"fire": {"threshold_fraction": 0.25}, "fire-512": {"threshold": 512},
                "xpos": {"scale_base_fraction": 0.5}, "xpos-512": {"scale_base": 512},
                "randomized-rope": {"base": "rope", "max_position_factor": 4},
                "randomized-rope-2048": {"base": "rope", "max_position": 2048}}
    for suite in (load_suite(CATALOG_DRAFT), load_suite("standard"), load_suite("paper")):
        entries = {e.key: e.params for e in suite.encodings if e.name in ("fire", "xpos", "randomized")}
        assert entries == relative, suite.name
    quick = {e.key: e for e in load_suite("quick").encodings if e.name == "fire"}  # the main command's budget
    assert sorted(quick) == ["fire"] and quick["fire"].params == {}


def test_standard_is_the_catalog_protocol_at_the_scale_checks_larger_model():
    """standard differs from the catalog draft only in its model (head_dim 32 at ~10x the FLOPs per token,
    the scale check's large side) and its kernel timings; paper shares its entries and variants."""
    catalog, standard = load_suite(CATALOG_DRAFT), load_suite("standard")
    for field in ("seeds", "train", "eval", "tasks", "encodings", "variants"):
        assert getattr(standard, field) == getattr(catalog, field), field
    assert (standard.model.d_model, standard.model.n_layers, standard.model.n_heads) == (128, 5, 4)
    assert standard.model == load_suite(CATALOG_DRAFT.parents[1] / "scale-large.yaml").model
    paper = load_suite("paper")
    assert paper.encodings == catalog.encodings and paper.train.schedule == catalog.train.schedule
    assert [v.key for v in paper.variants] == [v.key for v in catalog.variants]
    assert {t.name for t in paper.tasks} == {t.name for t in catalog.tasks}
    for suite in (standard, paper):
        assert suite.model.d_model // suite.model.n_heads == 32, suite.name  # 16 frequency pairs for RoPE


def test_papers_mqar_and_count_can_draw_their_longest_evaluation():
    paper = load_suite("paper")
    for cell in paper.cells():
        if cell.task.name in ("mqar", "count") and cell.encoding.key == "nope" and cell.seed == 0:
            task = build_task(cell.task.name, **cell.task.params)
            longest = round(max(cell.eval.ratios) * cell.train_len)
            assert longest == 16 * cell.train_len
            task.sample(1, longest, torch.Generator().manual_seed(0))  # raises past num_keys / max_count


# --- 7. Hugging Face rope dicts as they are ----------------------------------------------------


def _rope(scaling, *, d_model=256, n_heads=4, train_len=64, max_len=1024, **params):
    from lenbench.encodings import EncodingDims, build_encoding

    dims = EncodingDims(d_model=d_model, n_heads=n_heads, train_len=train_len, max_len=max_len)
    return build_encoding("rope", dims, scaling=scaling, **params)


def _theta(dim, base=1e4):
    return torch.tensor([base ** (-2 * i / dim) for i in range(dim // 2)], dtype=torch.float64)


def test_llama31_rope_scaling_dict_loads_unchanged():
    from lenbench.encodings.rope_scaling import rope_parameters

    hf = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
          "rope_type": "llama3"}
    enc = _rope(dict(hf), theta=500000.0)
    assert enc.scaling == hf
    inv, att = enc.frequencies(20000)
    ref, _ = rope_parameters(hf, 64, 500000.0, 20000)
    torch.testing.assert_close(inv, ref, rtol=0, atol=0)
    wavelen = 2 * math.pi / _theta(64, 500000.0)
    divided = torch.isclose(inv, _theta(64, 500000.0) / 8, rtol=1e-12, atol=0)
    assert att == 1.0 and divided.any() and bool((divided == (wavelen > 8192)).all())


def test_qwen2_dynamic_dict_without_original_length_takes_the_training_length():
    hf = {"type": "dynamic", "factor": 2.0}  # Qwen2's rope_scaling: transformers reads L0 from the model config
    enc = _rope(dict(hf), train_len=64)
    assert enc.scaling == {**hf, "original_max_position_embeddings": 64}
    dim, L = 64, 4 * 64
    inv, att = enc.frequencies(L)
    scale = 2.0 * L / 64 - (2.0 - 1)  # 7
    torch.testing.assert_close(inv, _theta(dim, 1e4 * scale ** (dim / (dim - 2))), rtol=1e-12, atol=0)
    torch.testing.assert_close(enc.frequencies(64)[0], _theta(dim), rtol=1e-12, atol=0)  # plain up to L0
    with pytest.raises(ValueError, match="needs parameter 'original_max_position_embeddings'"):
        _rope(dict(hf), train_len=None)  # nothing to take it from


def test_phi3_longrope_dict_loads_unchanged():
    short = [1.0 + 0.01 * i for i in range(48)]
    long = [1.5 + 0.5 * i for i in range(48)]
    hf = {"long_factor": long, "short_factor": short, "type": "longrope"}  # Phi-3-mini-128k, head_dim 96
    enc = _rope(dict(hf), d_model=3072, n_heads=32, train_len=4096, max_len=131072)
    assert enc.rot_dim == 96
    inv_short, att = enc.frequencies(4096)
    inv_long, att_long = enc.frequencies(4097)
    theta = _theta(96)
    torch.testing.assert_close(inv_short, theta / torch.tensor(short, dtype=torch.float64), rtol=1e-12, atol=0)
    torch.testing.assert_close(inv_long, theta / torch.tensor(long, dtype=torch.float64), rtol=1e-12, atol=0)
    expected_att = math.sqrt(1 + math.log(131072 / 4096) / math.log(4096))  # transformers: from max / original
    assert att == pytest.approx(expected_att, rel=1e-12) and att_long == att


def test_partial_rotary_factor_inside_the_dict_sets_partial():
    enc = _rope({"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})
    assert enc.partial == 0.5 and enc.rot_dim == 32
    assert "partial_rotary_factor" not in enc.scaling
    enc.set_scaling({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5})  # same: fine
    with pytest.raises(ValueError, match=r"partial_rotary_factor=0.25 but the model rotates partial=0.5"):
        enc.set_scaling({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.25})
    with pytest.raises(ValueError, match="disagree; keep one"):
        _rope({"rope_type": "default", "partial_rotary_factor": 0.5}, partial=0.25)


def test_yarn_without_factor_derives_it_and_zero_betas_mean_default():
    from lenbench.encodings.rope_scaling import rope_parameters

    explicit = rope_parameters({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
                               64, 1e6, 16384)
    derived = rope_parameters({"rope_type": "yarn", "original_max_position_embeddings": 4096,
                               "max_position_embeddings": 16384, "beta_fast": 0, "beta_slow": 0}, 64, 1e6, 16384)
    torch.testing.assert_close(derived[0], explicit[0], rtol=0, atol=0)
    assert derived[1] == explicit[1] == pytest.approx(0.1 * math.log(4) + 1)
    with pytest.raises(ValueError, match=r"rope_type 'yarn' needs parameter 'factor'.*max_position_embeddings"):
        rope_parameters({"rope_type": "yarn", "original_max_position_embeddings": 4096}, 64, 1e6, 16384)
    # through the encoding, a Qwen3-style dict without original length takes the training length
    enc = _rope({"rope_type": "yarn", "factor": 4.0, "beta_fast": 0}, train_len=64)
    assert enc.scaling["original_max_position_embeddings"] == 64


# --- 5. realistic RoPE factors -----------------------------------------------------------------


def _variants(*entries):
    from lenbench.config import parse_suite

    return parse_suite({"tasks": [{"name": "copy", "train_len": 16}], "encodings": ["rope"],
                        "variants": list(entries)}).variants


def test_dynamic_must_be_pinned_as_deployed_and_a_bare_one_is_a_one_line_error():
    from lenbench.config import SuiteError

    with pytest.raises(SuiteError, match=r"^<suite>: variants\[0\]: rope_type 'dynamic' needs a pinned factor, as it "
                                         r"is deployed \(e\.g\. \{rope_type: dynamic, factor: 2\}\): its base already "
                                         r"grows with the sequence length, so the evaluation ratio would scale twice, "
                                         r"and factor 1 is oracle ntk again \(base \* \(L/L0\)\^\(d/\(d-2\)\) at every length\)$"):
        _variants("dynamic")
    with pytest.raises(SuiteError, match=r"variants\[1\]: rope_type 'dynamic' needs a pinned factor"):
        _variants("ntk", {"rope_type": "dynamic", "finetune_steps": 10})  # fine-tuning does not pin it either


def test_dynamic_at_factor_one_is_oracle_ntk_bit_for_bit_which_is_why_it_is_pinned():
    """transformers' formula at factor 1: base · (1 · L/L0 − 0)^(d/(d−2)) = ntk with factor L/L0."""
    from lenbench.encodings.rope_scaling import rope_parameters

    L0 = 32
    for ratio in (1, 2, 4, 8, 16):
        dyn = rope_parameters({"rope_type": "dynamic", "factor": 1.0, "original_max_position_embeddings": L0},
                              16, 1e4, ratio * L0)
        ntk = rope_parameters({"rope_type": "ntk", "factor": float(ratio)}, 16, 1e4, ratio * L0)
        assert torch.equal(dyn[0], ntk[0]) and dyn[1] == ntk[1] == 1.0


def _transformers_dynamic(dim: int, base: float, factor: float, seq_len: int, original: int) -> list[float]:
    """transformers' `_compute_dynamic_ntk_parameters`, written out in float64 with `math`."""
    seq_len = max(seq_len, original)
    new_base = base * ((factor * seq_len / original) - (factor - 1)) ** (dim / (dim - 2))
    return [1.0 / new_base ** (i / dim) for i in range(0, dim, 2)]


def test_pinned_dynamic_is_transformers_formula_and_differs_from_oracle_ntk_past_the_training_length():
    from lenbench.encodings.rope_scaling import factor_mode, scaling_for

    ntk, dynamic = _variants("ntk", {"rope_type": "dynamic", "factor": 2})
    assert (factor_mode(dynamic), dynamic.key) == ("pinned", "dynamic@2")
    L0, dim = 32, 64  # tokens at the training length; _rope's head dim (256 / 4)
    for ratio in (1, 2, 4, 16):
        scaling = scaling_for(dynamic, ratio, L0)
        assert scaling == {"rope_type": "dynamic", "factor": 2, "original_max_position_embeddings": L0}  # every length
        enc = _rope(scaling, train_len=L0)
        inv, att = enc.frequencies(ratio * L0)
        expected = torch.tensor(_transformers_dynamic(dim, 1e4, 2.0, ratio * L0, L0), dtype=torch.float64)
        torch.testing.assert_close(inv, expected, rtol=1e-12, atol=0)
        assert att == 1.0
        oracle, _ = _rope(scaling_for(ntk, ratio, L0), train_len=L0).frequencies(ratio * L0)
        if ratio == 1:  # at the training length both are plain RoPE
            torch.testing.assert_close(inv, oracle, rtol=1e-12, atol=0)
        else:  # past it, dynamic@2 scales its base by 2r − 1, oracle ntk by r: every frequency but θ_0 differs
            assert not torch.isclose(inv[1:], oracle[1:], rtol=1e-6, atol=0).any()
            assert (inv[1:] < oracle[1:]).all()  # the larger base: lower frequencies


def test_static_types_are_oracle_unless_a_factor_is_pinned():
    from lenbench.encodings.rope_scaling import factor_mode, scaling_for

    yarn, pinned, in_params, tuned, plain = _variants(
        "yarn", {"rope_type": "yarn", "factor": 16}, {"rope_type": "yarn", "params": {"factor": 4}},
        {"rope_type": "yarn", "finetune_steps": 100, "finetune_ratio": 4}, {"rope_type": "default", "theta": 500.0})
    # Its own suite: its key (yarn@4) equals in_params' and two variants of one suite may not share a key.
    (derived,) = _variants({"rope_type": "yarn", "max_position_embeddings": 128, "original_max_position_embeddings": 32})
    assert [factor_mode(v) for v in (yarn, pinned, in_params, derived, tuned, plain)] == \
        ["oracle", "pinned", "pinned", "pinned", "fine-tuned", "none"]
    assert [v.key for v in (yarn, pinned, in_params, derived, tuned, plain)] == \
        ["yarn", "yarn@16", "yarn@4", "yarn@4", "finetune-yarn-x4", "default"]
    assert [scaling_for(yarn, r, 32)["factor"] for r in (1, 2, 8)] == [1.0, 2.0, 8.0]
    assert [scaling_for(pinned, r, 32)["factor"] for r in (1, 2, 8)] == [16, 16, 16]
    assert "factor" not in scaling_for(derived, 8, 32)  # yarn derives 128 / 32 itself
    assert scaling_for(tuned, 4, 32)["factor"] == 4.0
    from lenbench.report.rows import variant_rope_type, variant_sort_key

    assert variant_rope_type("yarn@16") == "yarn" and variant_rope_type("finetune-yarn@16-x4") == "yarn"
    assert sorted(["yarn@16", "none", "finetune-yarn-x4", "yarn", "linear"], key=variant_sort_key) == \
        ["none", "linear", "yarn", "finetune-yarn-x4", "yarn@16"]


def test_a_transformers_rope_dict_pasted_as_a_variant_works_and_typos_name_the_key():
    from lenbench.config import SuiteError

    (llama,) = _variants({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192})
    assert llama.key == "llama3@8" and llama.params["low_freq_factor"] == 1.0
    (qwen,) = _variants({"type": "dynamic", "factor": 2.0})
    assert qwen.rope_type == "dynamic" and qwen.key == "dynamic@2"
    with pytest.raises(SuiteError, match=r"unknown key variants\[0\].facter; did you mean 'factor'\?"):
        _variants({"rope_type": "yarn", "facter": 4})
    with pytest.raises(SuiteError, match=r"unknown key variants\[0\].finetune_step; did you mean 'finetune_steps'\?"):
        _variants({"rope_type": "yarn", "finetune_step": 4})
    with pytest.raises(SuiteError, match=r"gives 'factor' both beside rope_type and in params; keep one"):
        _variants({"rope_type": "yarn", "factor": 4, "params": {"factor": 8}})


# --- 3. lm: context gain and loss by position --------------------------------------------------


def _tiny_model(task, encoding="alibi", seed=0):
    torch.manual_seed(seed)
    return Transformer(ModelConfig(vocab_size=task.vocab_size, d_model=16, n_layers=1, n_heads=2, ff_mult=2,
                                   encoding=encoding, max_len=4096)).eval()


def test_window_logits_equal_a_fresh_forward_of_each_truncated_context():
    from lenbench.tasks.lm_context import window_logits

    task = build_task("lm")
    model = _tiny_model(task, "rope")
    inputs = torch.randint(0, 256, (2, 40), generator=torch.Generator().manual_seed(1))
    columns = torch.tensor([3, 15, 16, 39])
    got = window_logits(model, inputs, columns, window=16, tokens_per_batch=40)  # (2, 4, V), small chunks
    for j, t in enumerate(columns.tolist()):
        start = max(0, t - 15)
        ctx = inputs[:, start : t + 1] if t >= 16 else inputs[:, :16]
        expected = model(ctx)[:, -1 if t >= 16 else t].float()
        torch.testing.assert_close(got[:, j], expected, rtol=1e-5, atol=1e-5)


def test_window_evaluation_scores_the_same_target_bytes_as_the_full_one(monkeypatch):
    from lenbench import evaluate
    from lenbench.evaluate import evaluate_length
    from lenbench.tasks import lm_context
    from lenbench.tasks.lm_context import evaluate_lm_context

    task = build_task("lm", eval_tokens=8)
    model = _tiny_model(task)
    seen: dict[str, list] = {"full": [], "context": []}
    original = type(task).sample
    which = "full"

    def spy(self, batch_size, length, generator, split="train"):
        batch = original(self, batch_size, length, generator, split)
        seen[which].append(batch.targets[batch.loss_mask])
        return batch

    monkeypatch.setattr(type(task), "sample", spy)
    kw = {"samples": 6, "tokens_per_batch": 128, "seed": 3, "device": torch.device("cpu")}
    full, n, _ = evaluate_length(model, task, 64, **kw)
    which = "context"
    res = evaluate_lm_context(model, task, 64, 16, column_stride=1, **kw)  # every target column
    assert n == res["n_samples"] == 6
    assert torch.equal(torch.cat(seen["full"]), torch.cat(seen["context"][: len(seen["full"])]))  # the same target bytes
    assert res["perplexity"] == pytest.approx(full["perplexity"], rel=1e-6)
    # the default scores the window's columns and every 4th after it, both ways: its perplexity is
    # the full-context perplexity over exactly those targets
    every4 = evaluate_lm_context(model, task, 64, 16, **kw)
    assert lm_context.CONTEXT_COLUMN_STRIDE == 4
    chosen = torch.tensor([*range(16), *range(16, 64, 4)])
    nll = count = 0.0
    for batch in evaluate.eval_batches(task, 64, samples=6, tokens_per_batch=128, seed=3):
        per = torch.nn.functional.cross_entropy(model(batch.inputs).float().transpose(1, 2), batch.targets,
                                                reduction="none")[:, chosen]  # (B, C')
        m = batch.loss_mask[:, chosen]
        nll, count = nll + per[m].sum().item(), count + int(m.sum())
    assert every4["perplexity"] == pytest.approx(math.exp(nll / count), rel=1e-5)
    assert every4["window_perplexity"] != pytest.approx(res["window_perplexity"], rel=1e-9)  # fewer targets
    assert res["context_gain"] == pytest.approx(res["window_perplexity"] / res["perplexity"], rel=1e-9)
    # at the window length itself nothing is cut: a gain of exactly 1
    at_window = evaluate_lm_context(model, task, 16, 16, column_stride=1, **kw)
    assert at_window["context_gain"] == pytest.approx(1.0, abs=1e-6)
    # at 4x the window cuts the context of every scored target: the gain moves off 1
    assert res["context_gain"] != pytest.approx(1.0, abs=1e-6)
    assert evaluate.parse_bucket(res["positions"][0][0]) == ("pos", 0.0, 1.0)


def test_position_buckets_partition_the_window_and_average_to_the_mean_loss():
    from lenbench.evaluate import eval_generator, parse_bucket
    from lenbench.tasks.lm_context import evaluate_lm_context

    task = build_task("lm", eval_tokens=8)
    model = _tiny_model(task)
    res = evaluate_lm_context(model, task, 50, 16, samples=4, tokens_per_batch=100, seed=0,
                              device=torch.device("cpu"), position_buckets=8)
    spans = [parse_bucket(label)[1:] for label, _, _ in res["positions"]]
    assert spans[0][0] == 0 and spans[-1][1] == 49 and len(spans) == 8
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:], strict=False))  # contiguous, no gaps or overlaps
    counts = [c for _, _, c in res["positions"]]
    assert counts == [4 * (hi - lo + 1) for lo, hi in spans]
    # the count-weighted mean of the buckets is the mean loss over every target of the window
    batch = task.sample(4, 50, eval_generator(task, 50, 0), split="eval")
    logits = model(batch.inputs).float()
    mean = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), batch.targets.reshape(-1)).item()
    weighted = sum(v * c for _, v, c in res["positions"]) / sum(counts)
    assert weighted == pytest.approx(mean, rel=1e-6)


# --- 4. passkey: depth × length ----------------------------------------------------------------


def test_needle_depth_reads_the_needle_position():
    task = build_task("passkey", digits=3, filler_period=3)
    seq = task.sequence(12, passkey=[4, 0, 7], depth=2)  # 5 filler tokens, needle after 2
    depth = task.needle_depth(torch.tensor([seq[:-1]]))
    assert depth.tolist() == [2 / 5]
    edge = [task.sequence(12, passkey=[1, 2, 3], depth=d)[:-1] for d in (0, 5)]
    assert task.needle_depth(torch.tensor(edge)).tolist() == [0.0, 1.0]


def test_passkey_depth_buckets_sum_to_the_overall_accuracy():
    from lenbench.evaluate import evaluate_length, parse_bucket
    from lenbench.tasks.passkey_depth import evaluate_depth

    task = build_task("passkey")
    model = _tiny_model(task, "nope")
    # train a few steps so that accuracy is not uniform noise around 0
    train_model(model, task, 24, TrainSpec(steps=30, batch_size=8, lr=3e-3, warmup=3), seed=0,
                device=torch.device("cpu"), progress=False)
    kw = {"samples": 40, "tokens_per_batch": 256, "seed": 1, "device": torch.device("cpu")}
    whole, n, _ = evaluate_length(model, task, 48, **kw)
    res = evaluate_depth(model, task, 48, **kw)
    assert res["n_samples"] == n == 40 and sum(c for _, _, c in res["buckets"]) == 40
    for metric in ("token_accuracy", "exact_match"):
        weighted = sum(values[metric] * c for _, values, c in res["buckets"]) / 40
        assert weighted == pytest.approx(whole[metric], abs=1e-12) == res["overall"][metric]
    assert [parse_bucket(label)[0] for label, _, _ in res["buckets"]] == ["depth"] * len(res["buckets"])
    assert len(res["buckets"]) == 5 and res["buckets"][0][0] == "depth:0.00-0.20"


def test_bucket_labels_parse_and_bad_ones_name_the_form():
    from lenbench.evaluate import parse_bucket

    assert parse_bucket("pos:32-63") == ("pos", 32.0, 63.0)
    with pytest.raises(ValueError, match=r"bucket 'pos32' is not of the form '<kind>:<lo>-<hi>'"):
        parse_bucket("pos32")


def test_leaderboard_and_compare_ignore_bucket_rows_and_the_row_key_keeps_them_apart():
    import pandas as pd

    from lenbench.compare.quality import compare_rows
    from lenbench.report.rows import load_results
    from lenbench.report.tables import leaderboard

    def row(ratio, metric, value, bucket=""):
        return {"cell_id": "c", "suite": "s", "task": "passkey", "encoding": "alibi", "variant": "none",
                "train_len": 16, "eval_len": int(16 * ratio), "ratio": ratio, "metric": metric, "value": value,
                "seed": 0, "bucket": bucket}

    whole = [row(r, m, v) for r, v in ((1, 0.9), (2, 0.5)) for m in ("token_accuracy", "exact_match")]
    buckets = [row(r, "token_accuracy", v, f"depth:{lo:.2f}-{lo + 0.2:.2f}")
               for r in (1, 2) for lo, v in ((0.0, 0.0), (0.2, 1.0), (0.4, 0.3))]
    df = load_results(pd.DataFrame(whole + buckets))
    assert len(df) == len(whole) + len(buckets)  # bucket is part of the row key: nothing dropped as a duplicate
    only_whole = load_results(pd.DataFrame(whole))
    pd.testing.assert_frame_equal(leaderboard(df).per_task, leaderboard(only_whole).per_task)
    pd.testing.assert_frame_equal(leaderboard(df).wide, leaderboard(only_whole).wide)
    changed = load_results(pd.DataFrame(whole + [{**b, "value": 0.0} for b in buckets]))
    cmp = compare_rows(df, changed, 0.0)
    assert len(cmp) == len(whole) and set(cmp["status"]) == {"unchanged"}
    legacy = load_results(pd.DataFrame([{k: v for k, v in r.items() if k != "bucket"} for r in whole]))
    assert set(legacy["bucket"]) == {""}  # rows written before the column read as whole-length rows


@pytest.mark.slow
def test_report_writes_the_position_loss_and_needle_figures_only_when_rows_hold_them(tmp_path):
    import pandas as pd

    from lenbench.report.build import write_report
    from lenbench.report.plots.needle import needle_heatmap
    from lenbench.report.plots.position import position_loss_plot
    from lenbench.report.rows import load_results

    def row(task, ratio, metric, value, bucket="", variant="none", train_len=8):
        return {"cell_id": f"{task}{variant}", "suite": "s", "task": task, "encoding": "alibi", "variant": variant,
                "train_len": train_len, "eval_len": int(train_len * ratio), "ratio": ratio, "metric": metric,
                "value": value, "seed": 0, "bucket": bucket}

    rows = [row("lm", r, "perplexity", 3.0 + r) for r in (1, 2)]
    rows += [row("lm", r, "nll", 1.0 + i / 10, f"pos:{2 * i}-{2 * i + 1}") for r in (1, 2) for i in range(4)]
    rows += [row("passkey", r, "token_accuracy", 0.5) for r in (1, 2)]
    rows += [row("passkey", r, "token_accuracy", d, f"depth:{d:.2f}-{d + 0.5:.2f}") for r in (1, 2) for d in (0.0, 0.5)]
    df = pd.DataFrame(rows)
    names = {p.name for p in write_report(df, tmp_path / "with")}
    assert {"position_loss.png", "position_loss.svg", "needle_depth.png", "needle_depth.svg"} <= names
    plain = pd.DataFrame([r for r in rows if not r["bucket"]])
    names = {p.name for p in write_report(plain, tmp_path / "without")}
    assert not {n for n in names if n.startswith(("position_loss", "needle_depth"))}
    with pytest.raises(ValueError, match=r"position_loss_plot: no per-position rows \(bucket 'pos:…'\) to plot"):
        position_loss_plot(load_results(plain), tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"needle_heatmap: no needle-depth rows"):
        needle_heatmap(load_results(plain), tmp_path / "x.png")


def test_rows_of_pinned_dynamic_equal_oracle_ntk_at_the_training_length_and_differ_past_it():
    from lenbench.config import parse_suite
    from lenbench.run.cell import CellJob, compute_cell

    suite = parse_suite({"model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "ff_mult": 2},
                         "train": {"steps": 4, "batch_size": 2, "warmup": 1}, "eval": {"ratios": [1, 2, 4], "samples": 2},
                         "tasks": [{"name": "lm", "train_len": 16}], "encodings": ["rope"],
                         "variants": ["ntk", {"rope_type": "dynamic", "factor": 2}]})
    (cell,) = suite.cells()
    result = compute_cell(CellJob(cell=cell, device="cpu", threads=1)).result
    assert result.status == "ok", result.error
    ppl = {(r["variant"], r["ratio"]): r["value"] for r in result.rows
           if r["encoding"] == "rope" and r["metric"] == "perplexity" and not r["bucket"]}
    assert ppl[("none", 1.0)] == ppl[("ntk", 1.0)] == ppl[("dynamic@2", 1.0)]  # plain RoPE at the training length
    for ratio in (2.0, 4.0):
        assert ppl[("dynamic@2", ratio)] != ppl[("ntk", ratio)]  # no duplicate row past it


# --- issue 42: the catalog's budgets come from calibration runs on other seeds ------------------

#: Each catalog task's calibration entry: (study, task label there).
CALIBRATED = {name: ("calibration-patience", name) for name in ("reverse", "sort", "count", "passkey")}
CALIBRATED["mqar"] = ("mqar-rate", "mqar_b128")
CALIBRATED["copy"] = ("copy-b128", "copy_b128")
CALIBRATED["addition"] = ("addition-plateau", "addition_b128_24k")


def _runs(study: str) -> list[tuple[dict, dict]]:
    """(first row, config) of every committed cell of a protocol study (one training run each)."""
    import json

    cells = [json.loads(p.read_text()) for p in (CATALOG_DRAFT.parents[1] / study / "cells").glob("*.json")]
    return [(c["rows"][0], c["config"]) for c in cells]


@pytest.mark.parametrize("name", sorted(CALIBRATED))
def test_each_catalog_task_is_its_calibration_entry_on_disjoint_seeds_under_a_maximum_no_converged_run_reached(name):
    """Issue 42, items 1 and 4: the draft trains each task exactly as the calibration run that chose its
    settings (model, rule, rate, batch, evaluation), on seeds the calibration did not use, and its maximum
    is a ceiling: every calibration run that converged did so below it."""
    catalog = load_suite(CATALOG_DRAFT)
    study_name, label = CALIBRATED[name]
    study = load_suite(CATALOG_DRAFT.parents[1] / f"{study_name}.yaml")
    (ours,) = [t for t in catalog.tasks if t.key == name]
    (theirs,) = [t for t in study.tasks if t.key == label]
    assert (theirs.name, theirs.train_len, theirs.params) == (ours.name, ours.train_len, ours.params)
    assert theirs.model_spec(study.model) == ours.model_spec(catalog.model)
    assert theirs.train_spec(study.train) == ours.train_spec(catalog.train)
    assert theirs.eval_spec(study.eval) == ours.eval_spec(catalog.eval)
    assert not set(study.seeds) & set(catalog.seeds)
    converged = [row["train_steps"] for row, _ in _runs(study_name)
                 if row["task"] == label and row["stop_reason"] == "converged"]
    assert converged, f"no {label} run of {study_name} converged"
    assert max(converged) < ours.train_spec(catalog.train).steps


def test_catalog_lm_is_budget_bound_at_its_calibrations_maximum():
    """lm does not converge within the 6000 steps its calibration ran (23 of 24 runs stopped at the
    maximum): the draft keeps that maximum and anneals over it (cosine), on seeds the calibration did not
    use, and its board says it is budget-bound."""
    catalog = load_suite(CATALOG_DRAFT)
    (ours,) = [t for t in catalog.tasks if t.key == "lm"]
    spec = ours.train_spec(catalog.train)
    assert spec.steps == 6000 and spec.schedule == "cosine"
    lm = [(row, config) for row, config in _runs("calibration-plateau") if row["task"] == "lm"]
    assert len(lm) == 24 and all(config["train"]["steps"] == spec.steps for _, config in lm)
    assert sum(row["stop_reason"] == "budget" for row, _ in lm) >= 0.9 * len(lm)
    assert not {row["seed"] for row, _ in lm} & set(catalog.seeds)
