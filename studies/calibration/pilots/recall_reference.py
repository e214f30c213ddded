"""Is recall's failure lenbench's model, or the budget? Train a model that shares no code with
lenbench's (`torch.nn.TransformerEncoder`, pre-LN, learned absolute positions, PyTorch's default
initialisation) on lenbench's `recall` samples, at the study's size and budget, and print exact match at
1x every 500 steps.

    python studies/calibration/pilots/recall_reference.py --pairs 8 --num-keys 128 --steps 3000
    python studies/calibration/pilots/recall_reference.py --pairs 2 --num-keys 16 --steps 1500

Same geometry as the study (d_model 64, 2 layers, 4 heads, feed-forward 4x, batch 32, AdamW betas 0.9,
0.98, weight decay 0.01, gradient clipping 1.0, uniform pair counts 1 ... --pairs), a constant learning
rate. Its output is recall_reference.txt beside this file.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from lenbench.tasks import build_task


class Reference(nn.Module):
    def __init__(self, vocab: int, d_model: int, max_len: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T)  # (T, T) additive causal mask
        h = self.tok(x) + self.pos(torch.arange(T))  # (B, T, D)
        return self.head(self.ln(self.blocks(h, mask=mask, is_causal=True)))  # (B, T, V)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--num-keys", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    task = build_task("recall", num_keys=args.num_keys)
    model = Reference(task.vocab_size, 64, task.seq_len(args.pairs))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    gen, eval_gen = torch.Generator().manual_seed(args.seed), torch.Generator().manual_seed(10_000 + args.seed)
    for step in range(1, args.steps + 1):
        n = int(torch.randint(1, args.pairs + 1, (1,), generator=gen))
        batch = task.sample(32, n, gen)
        logits = model(batch.inputs)  # (B, T, V)
        loss = F.cross_entropy(logits[batch.loss_mask], batch.targets[batch.loss_mask])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 500 == 0:
            with torch.no_grad():
                e = task.sample(256, args.pairs, eval_gen, split="eval")
                right = (model(e.inputs).argmax(-1) == e.targets) | ~e.loss_mask  # (256, T)
            print(f"pairs {args.pairs} keys {args.num_keys} step {step}: exact match "
                  f"{right.all(1).float().mean().item():.3f} (chance {task.chance:.3f})", flush=True)


if __name__ == "__main__":
    main()
