"""`lm`'s context measurement: does the longer context help, and the loss by position.

A tidy row's `bucket` here is "pos:<lo>-<hi>": targets at positions lo … hi (inclusive, 0-based
within the evaluation window), metric nll, the per-position loss curve (Press et al. 2022, fig. 3);
`lenbench.results.labels.parse_bucket` reads a label back. Bucketed rows are not leaderboard rows.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from lenbench.results.labels import position_bucket
from lenbench.tasks.base import Task
from lenbench.tasks.decoding import finite_logits
from lenbench.tasks.eval_data import eval_batches_on

if TYPE_CHECKING:  # annotations only: the measurement runs any model it is given
    from lenbench.model import Transformer

#: Position buckets per lm evaluation length (fewer when the window is shorter).
POSITION_BUCKETS = 32

def window_logits(model: Transformer, inputs: torch.Tensor, columns: torch.Tensor, window: int,
                  tokens_per_batch: int) -> torch.Tensor:
    """Logits at `columns` of `inputs` with each prediction's context cut to the last `window` tokens.

    A target at column t is predicted from inputs[t − window + 1 … t] run as a fresh sequence
    (positions 0 … window − 1), the sliding-window evaluation of Press et al. 2022 (§4, stride 1);
    columns t < window read the prefix inputs[:window], whose context is already within the window.

    Args:
        model: the model.
        inputs: (B, T) token ids.
        columns: (C,) long, the target columns to predict.
        window: context length (the training length in tokens).
        tokens_per_batch: bound of tokens per forward pass.

    Returns:
        (B, C, V) float logits.
    """
    B, T = inputs.shape
    out = torch.empty(B, len(columns), model.cfg.vocab_size, device=inputs.device)  # (B, C, V)
    early = columns < window  # (C,)
    if early.any():
        prefix = model(inputs[:, : min(window, T)]).float()  # (B, W, V)
        out[:, early] = prefix[:, columns[early]]  # (B, Ce, V)
    late = (~early).nonzero().flatten()  # (Cl,)
    if len(late):
        starts = columns[late] - window + 1  # (Cl,)
        ctx = inputs.unfold(1, window, 1)[:, starts]  # (B, Cl, W)
        flat = ctx.reshape(-1, window)  # (B·Cl, W)
        rows = max(1, tokens_per_batch // window)
        last = torch.cat([model(flat[i : i + rows])[:, -1].float() for i in range(0, len(flat), rows)])  # (B·Cl, V)
        out[:, late] = last.view(B, len(late), -1)  # (B, Cl, V)
    return finite_logits(out, T, window)


# Window perplexity scores every CONTEXT_COLUMN_STRIDE-th target column past the window: each
# such target costs a forward pass of a whole window (stride-1 sliding windows), which made it
# the largest part of evaluating a RoPE cell with its variants; 1 in 4 keeps ~16k targets per
# length at the quick suite's 64 samples of 1024 bytes.
CONTEXT_COLUMN_STRIDE = 4


@torch.no_grad()
def evaluate_lm_context(
    model: Transformer, task: Task, length: int, window: int, *, samples: int, tokens_per_batch: int, seed: int,
    device: torch.device, position_buckets: int = POSITION_BUCKETS, column_stride: int = CONTEXT_COLUMN_STRIDE,
) -> dict:
    """Does the longer context help? Score the examples of `lenbench.evaluate.evaluate_length(length)` twice: with the
    full context and with each prediction's context cut to `window` (the training length in
    tokens), and record the loss by position within the full window.

    The same target bytes are scored both ways: the targets of the loss mask in the first
    `window` columns and every `column_stride`-th column after them (the same columns in every
    example), so `context_gain = window_perplexity / perplexity` (both over those targets) is the
    context's effect alone: > 1 when the tokens beyond the training length help, 1 when the model
    ignores them (a local window), < 1 when they hurt. The per-position loss covers every target of the window (not only the
    scored ones) in `position_buckets` equal-width buckets: the loss-by-position curve of Press et
    al. 2022 (ALiBi), Sun et al. 2022 (xPos) and Ding et al. 2024 (LongRoPE).

    Returns:
        {"perplexity", "window_perplexity", "context_gain", "nll", "window_nll", "n_samples",
        "positions": [(label, mean nll, n targets), …] in position order}.
    """
    model.eval()
    nll_full = nll_win = 0.0
    scored = done = 0
    width = position_buckets
    pos_sum = pos_count = None
    for batch in eval_batches_on(task, length, samples, tokens_per_batch, seed, device):
        logits = finite_logits(model(batch.inputs).float(), length)  # (B, T, V)
        B, T, V = logits.shape
        per_pos = F.cross_entropy(logits.reshape(-1, V), batch.targets.reshape(-1), reduction="none").view(B, T)  # (B, T)
        if pos_sum is None:
            width = max(1, min(position_buckets, T))
            pos_sum, pos_count = torch.zeros(width, dtype=torch.float64), torch.zeros(width, dtype=torch.float64)
        index = torch.arange(T) * width // T  # (T,): bucket of each position
        pos_sum.index_add_(0, index, per_pos.sum(0).double().cpu())
        pos_count.index_add_(0, index, torch.full((T,), float(B), dtype=torch.float64))
        columns = batch.loss_mask.any(0).nonzero().flatten()  # (C,)
        columns = torch.cat((columns[columns < window], columns[columns >= window][::column_stride]))  # (C',)
        win = window_logits(model, batch.inputs, columns, window, tokens_per_batch)  # (B, C', V)
        m = batch.loss_mask[:, columns]  # (B, C')
        target = batch.targets[:, columns]  # (B, C')
        nll_full += per_pos[:, columns][m].sum().item()
        nll_win += F.cross_entropy(win[m], target[m], reduction="sum").item()
        scored += int(m.sum())
        done += B
    edges = [(i * T + width - 1) // width for i in range(width + 1)] if pos_sum is not None else []  # bucket i: ⌈iT/W⌉ …
    nll, nll_w = nll_full / scored, nll_win / scored
    ppl, ppl_w = math.exp(min(nll, 700.0)), math.exp(min(nll_w, 700.0))
    positions = [(position_bucket(edges[i], edges[i + 1] - 1), float(pos_sum[i] / pos_count[i]), int(pos_count[i]))
                 for i in range(width)] if pos_sum is not None else []
    return {"perplexity": ppl, "window_perplexity": ppl_w, "context_gain": math.exp(min(nll_w - nll, 700.0)),
            "nll": nll, "window_nll": nll_w, "n_samples": done, "positions": positions}
