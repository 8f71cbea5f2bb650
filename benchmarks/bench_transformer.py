"""The character-level GPT of ``python -m chainrule train --model transformer`` against PyTorch eager.

One training step at the command's default size (d_model 96, 4 layers, 4 heads, n_ctx 64, batch 32,
the Devil's Dictionary's 81 symbols, float32): zero_grad, forward, loss, backward, clip_grad_norm_(1.0),
AdamW and the schedule's step, as ``train/lm.py``'s ``Trainer.step`` runs it: eagerly, with the
forward+backward under ``cr.compile`` (``--compile``; clipping and AdamW stay eager), and the torch twin
(``_models.gpt_torch``: the same architecture, parameter names and weights, copied from the chainrule
model; the same batch). Then the forward alone (logits and loss under no_grad, as evaluation runs it).
``--quick``: a tiny model.
"""
from __future__ import annotations

import _harness as H
import _models as M
import numpy as np

import chainrule as cr
from chainrule.func.compile import compile as cr_compile
from chainrule.train import lm
from chainrule.train.transformer import GPT, GPTConfig, lm_loss, param_groups, warmup_cosine

TORCH = "PyTorch eager"
EAGER, COMPILED = "chainrule", "chainrule + cr.compile"


def _args(quick: bool):
    small = ["--batch-size", "4", "--n-ctx", "16", "--d-model", "32", "--n-layer", "2", "--n-head", "2"]
    return lm.parser().parse_args(small if quick else [])


def _data(args) -> tuple:
    """The model (seeded as the command seeds it) and one training batch, as ndarrays."""
    corpus = cr.data.CharCorpus.devils_dictionary(val_fraction=0.1, seed=args.seed)
    cr.random.manual_seed(args.seed)
    model = GPT(GPTConfig(len(corpus.vocab), args.n_ctx, args.d_model, args.n_head, args.n_layer))
    x, y = corpus.batch("train", args.batch_size, args.n_ctx, generator=np.random.default_rng(args.seed + 1))
    return model, x.data, y.data


# ----- one training step -----
def _cr_step(args, compiled: bool):
    def setup():
        model, x, y = _data(args)
        trainer = lm.Trainer(model, args.__class__(**{**vars(args), "compile": compiled}))
        x, y = cr.tensor(x), cr.tensor(y)
        step = lambda: trainer.step(x, y)
        return step, step()
    return setup


def _torch_step(torch, args):
    def setup():
        model, x, y = _data(args)
        step_fn = M.gpt_torch_trainer(torch, M.gpt_torch(torch, model), args, param_groups,
                                      warmup_cosine(args.warmup, args.steps))
        x, y = torch.tensor(x), torch.tensor(y)
        step = lambda: step_fn(x, y)
        return step, step()
    return setup


# ----- the forward alone -----
def _cr_forward(args, compiled: bool):
    def setup():
        model, x, y = _data(args)
        x, y = cr.tensor(x), cr.tensor(y)

        def forward():
            with cr.no_grad():
                return lm_loss(model(x), y)
        step = cr_compile(forward) if compiled else forward
        return step, step()
    return setup


def _torch_forward(torch, args):
    def setup():
        model, x, y = _data(args)
        twin, x, y = M.gpt_torch(torch, model), torch.tensor(x), torch.tensor(y)

        def step():
            with torch.no_grad():
                return M.gpt_torch_loss(torch, twin(x), y)
        return step, step()
    return setup


def cases(quick: bool = False) -> list[H.Case]:
    torch, args = H.peer("torch"), _args(quick)
    size = (f"d_model {args.d_model}, {args.n_layer} layers, {args.n_head} heads, n_ctx {args.n_ctx}, "
            f"batch {args.batch_size}, float32")
    out = []
    for key, title, cr_setup, torch_setup, targets in (
            ("gpt_step", f"GPT training step (zero_grad, forward, loss, backward, clip, AdamW), {size}",
             _cr_step, _torch_step, [("GPT step vs PyTorch eager", EAGER, 1.2),
                                     ("GPT step, compiled, vs PyTorch eager", COMPILED, 1.0)]),
            ("gpt_forward", f"GPT forward + loss under no_grad, {size}", _cr_forward, _torch_forward, [])):
        rows = [H.Contender(EAGER, "chainrule", cr_setup(args, False)),
                H.Contender(COMPILED, "chainrule", cr_setup(args, True))]
        if torch is not None:
            rows.append(H.Contender(TORCH, "torch", torch_setup(torch, args)))
        out.append(H.Case(key, title, rows, baseline=TORCH if torch is not None else EAGER,
                          targets=[H.Target(label, num, TORCH, limit) for label, num, limit in targets]
                          if torch is not None else [],
                          rtol=1e-5, atol=1e-6, notes=H.skip_note(["torch"])))
    return out


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
