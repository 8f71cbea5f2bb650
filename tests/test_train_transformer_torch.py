"""The character-level GPT against its PyTorch twin (``benchmarks/_models.py``'s ``gpt_torch``, loaded with
chainrule's weights), in float64: the same logits, loss and parameter gradients, and the same losses
over training steps with AdamW, clipping and the warm-up/cosine schedule of ``train/lm.py``."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import chainrule as cr
from chainrule.train import lm
from chainrule.train.transformer import GPT, GPTConfig, lm_loss, param_groups, warmup_cosine

torch = pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location("_models", Path(__file__).parents[1] / "benchmarks" / "_models.py")
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)

VOCAB, BATCH, N_CTX = 23, 4, 16


@pytest.fixture
def float64():
    cr.set_default_dtype(cr.float64)
    yield
    cr.set_default_dtype(cr.float32)


def twins(seed=0, **sizes):
    cfg = GPTConfig(VOCAB, **{"n_ctx": N_CTX, "d_model": 32, "n_head": 4, "n_layer": 2, **sizes})
    cr.random.manual_seed(seed)
    ours = GPT(cfg)
    assert ours.wte.weight.dtype == np.float64
    return ours, M.gpt_torch(torch, ours)


def batch(seed=1, t=N_CTX):
    rng = np.random.default_rng(seed)
    return rng.integers(0, VOCAB, (BATCH, t)), rng.integers(0, VOCAB, (BATCH, t))


def close(ours, theirs, what, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(ours.data), theirs.detach().numpy(), rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("t", [N_CTX, 5])
def test_logits_loss_and_gradients_match_torch(float64, t):
    ours, theirs = twins()
    x, y = batch(t=t)
    logits, their_logits = ours(cr.tensor(x)), theirs(torch.tensor(x))
    close(logits, their_logits, "logits")
    loss, their_loss = lm_loss(logits, cr.tensor(y)), M.gpt_torch_loss(torch, their_logits, torch.tensor(y))
    close(loss, their_loss, "loss")
    loss.backward()
    their_loss.backward()
    theirs_named = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p.grad, theirs_named[name].grad, f"gradient of {name}")
    # the tied output layer: wte's gradient holds both the embedding's rows and the output layer's
    assert np.count_nonzero(ours.wte.weight.grad.data) == ours.wte.weight.size


def test_five_training_steps_match_torch(float64):
    ours, theirs = twins(seed=3)
    args = lm.parser().parse_args(["--steps", "5", "--warmup", "2", "--lr", "1e-2", "--clip", "0.5"])
    trainer = lm.Trainer(ours, args)
    their_step = M.gpt_torch_trainer(torch, theirs, args, param_groups, warmup_cosine(args.warmup, args.steps))
    mine, their = [], []
    for s in range(5):
        x, y = batch(seed=10 + s)
        mine.append(trainer.step(cr.tensor(x), cr.tensor(y)))
        their.append(their_step(torch.tensor(x), torch.tensor(y)))
    np.testing.assert_allclose(mine, their, rtol=1e-9, atol=0)
    assert max(trainer.grad_norms) > args.clip          # clipping was active
    assert mine[-1] < mine[0]
    theirs_named = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p, theirs_named[name], f"{name} after 5 steps", rtol=1e-9, atol=1e-11)


def test_the_twin_refuses_a_model_whose_names_differ():
    cr.random.manual_seed(0)
    model = GPT(GPTConfig(VOCAB, n_ctx=8, d_model=8, n_head=2, n_layer=1))
    model.extra = cr.nn.Linear(2, 2)
    with pytest.raises(AssertionError, match="parameter names differ"):
        M.gpt_torch(torch, model)
