"""``python -m chainrule train --model transformer``: the GPT, its training, and the seeds' figures."""
from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest

import chainrule as cr
from chainrule import train
from chainrule.train import figures, lm
from chainrule.train.transformer import GPT, GPTConfig, lm_loss, warmup_cosine

TINY = ["--steps", "20", "--batch-size", "8", "--n-ctx", "32", "--d-model", "32", "--n-layer", "2",
        "--n-head", "2", "--eval-every", "10", "--quiet"]


@pytest.fixture(scope="module")
def corpus():
    return cr.data.CharCorpus.devils_dictionary()


def tiny(corpus, n_layer=2, n_ctx=32, d_model=32, seed=0, **kw):
    cr.random.manual_seed(seed)
    return GPT(GPTConfig(len(corpus.vocab), n_ctx, d_model, 2, n_layer), **kw)


def grads(model, x, y):
    model.zero_grad()
    loss = model.loss(x, y)
    loss.backward()
    return loss.item(), [p.grad.data.copy() for p in model.parameters()]


def test_twenty_steps_lower_the_loss(corpus):
    args = lm.parser().parse_args(TINY + ["--lr", "1e-2", "--warmup", "5"])
    model = tiny(corpus)
    before = figures_free_val(model, corpus)
    history = lm.train(model, corpus, args, log=lambda *a: None)
    assert len(history["train_loss"]) == 20 and history["val_step"] == [10, 20]
    assert history["val_loss"][-1] < before - 0.5, (before, history["val_loss"])
    assert np.mean(history["train_loss"][-5:]) < np.mean(history["train_loss"][:5]) - 0.5
    # the schedule: warm-up to the peak at step 5, then cosine decay
    lrs = history["lr"]
    assert lrs[3] == pytest.approx(1e-2) and lrs[-1] < lrs[5] < lrs[4]


def figures_free_val(model, corpus):
    return lm.evaluate(model, corpus, max_batches=4)


def test_warmup_cosine():
    f = warmup_cosine(10, 110, floor=0.1)
    assert [f(0), f(9)] == [0.1, 1.0]
    assert f(60) == pytest.approx(0.1 + 0.9 * 0.5) and f(110) == pytest.approx(0.1) and f(500) == pytest.approx(0.1)


def test_generation_is_deterministic_under_a_seed(corpus):
    model = tiny(corpus)
    prompt = corpus.encode("ABC, n.  ")
    a = model.generate(prompt, 30, temperature=0.8, top_k=5, generator=np.random.default_rng(3))
    b = model.generate(prompt, 30, temperature=0.8, top_k=5, generator=np.random.default_rng(3))
    c = model.generate(prompt, 30, temperature=0.8, top_k=5, generator=np.random.default_rng(4))
    assert a.shape == (30,) and np.array_equal(a, b) and not np.array_equal(a, c)
    assert set(corpus.decode(a)) <= set(corpus.vocab)
    # top_k=1 is greedy: the argmax of the logits at each step
    greedy = model.generate(prompt, 5, top_k=1)
    ids = list(prompt)
    for _ in range(5):
        with cr.no_grad():
            ids.append(int(np.argmax(model(cr.tensor(np.array([ids[-32:]]))).data[0, -1])))
    assert greedy.tolist() == ids[-5:]
    with pytest.raises(ValueError, match="temperature must be > 0"):
        model.generate(prompt, 3, temperature=0)


def test_a_sequence_longer_than_the_context_is_refused(corpus):
    with pytest.raises(ValueError, match="longer than n_ctx=32; crop it"):
        tiny(corpus)(cr.tensor(np.zeros((1, 33), np.int64)))


@pytest.mark.parametrize("mode", ["block", "sqrt"])
def test_checkpointed_gradients_equal_plain_ones_bitwise(corpus, mode):
    # the recomputation runs the same kernels on the same inputs: equal to the last bit
    x, y = corpus.batch("train", 4, 32, generator=np.random.default_rng(0))
    plain = tiny(corpus, n_layer=4)
    ckpt = copy.deepcopy(plain)
    ckpt.checkpoint = mode
    (l1, g1), (l2, g2) = grads(plain, x, y), grads(ckpt, x, y)
    assert l1 == l2 and all(np.array_equal(a, b) for a, b in zip(g1, g2))


def test_counted_matmul_flops_equal_the_closed_form(corpus):
    for n_layer, n_ctx, batch in ((1, 16, 2), (3, 32, 5)):
        model = tiny(corpus, n_layer=n_layer, n_ctx=n_ctx)
        x, y = corpus.batch("train", batch, n_ctx, generator=np.random.default_rng(1))
        counted = figures.counted_flops(model, x, y)
        closed = figures.closed_form_flops(model.cfg, batch)
        assert counted["matmul_forward"] == closed["forward"]
        assert counted["matmul_backward"] == closed["backward"]
        assert closed["n_matmul"] == model.num_parameters(matmul_only=True)
        assert model.num_parameters() - closed["n_matmul"] == (
            n_ctx * 32 + n_layer * (9 * 32 + 4 * 32) + 2 * 32)     # wpe, biases + LayerNorms, ln_f


def test_saved_bytes_are_linear_in_batch_and_depth_and_quadratic_only_through_attention(corpus):
    def saved(batch=2, n_ctx=16, n_layer=2):
        model = tiny(corpus, n_layer=n_layer, n_ctx=n_ctx)
        x, y = corpus.batch("train", batch, n_ctx, generator=np.random.default_rng(0))
        return figures.forward_saved_bytes(model, x, y)
    b = [saved(batch=k) for k in (1, 2, 3, 4)]
    assert b == [k * b[0] for k in (1, 2, 3, 4)]                  # proportional to the batch
    d = [saved(n_layer=k) for k in (1, 2, 3, 4)]
    assert len({d[i + 1] - d[i] for i in range(3)}) == 1         # a + b * n_layer
    t = [saved(n_ctx=k) for k in (8, 16, 24, 32)]
    per_token = [s / k for s, k in zip(t, (8, 16, 24, 32))]      # a + b * n_ctx: the (T x T) scores
    steps = {round(per_token[i + 1] - per_token[i], 9) for i in range(3)}
    assert len(steps) == 1 and steps.pop() > 0
    model = tiny(corpus)
    x, y = corpus.batch("train", 2, 32, generator=np.random.default_rng(0))
    assert figures.forward_saved_bytes(model, x, y, grad=False) == 0


def test_checkpointing_cuts_the_peak(corpus):
    model = tiny(corpus, n_layer=9)
    x, y = corpus.batch("train", 4, 32, generator=np.random.default_rng(0))
    plain, block, sqrt = (figures.activation_bytes(model, x, y, m) for m in ("none", "block", "sqrt"))
    assert block < sqrt < plain
    assert sqrt / plain < 2 * math.sqrt(9) / 9


def test_compiled_forward_backward_replays_bitwise(corpus):
    args = lm.parser().parse_args(TINY + ["--steps", "4"])
    runs = []
    for compiled in (False, True):
        model = tiny(corpus)
        history = lm.train(model, corpus, argparse_with(args, compile=compiled), log=lambda *a: None)
        runs.append((history["train_loss"], [p.data.copy() for p in model.parameters()]))
        if compiled:
            info = history["trainer"].forward_backward.cache_info()
            assert info.replays >= 2 and info.eager_runs == 0, history["trainer"].forward_backward.last_miss
    assert runs[0][0] == runs[1][0]
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


def argparse_with(args, **kw):
    new = copy.copy(args)
    for k, v in kw.items():
        setattr(new, k, v)
    return new


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_low_precision_runs_train(corpus, precision):
    args = lm.parser().parse_args(TINY + ["--precision", precision, "--lr", "1e-2", "--warmup", "5"])
    model = tiny(corpus)
    history = lm.train(model, corpus, args, log=lambda *a: None)
    assert history["val_loss"][-1] < history["val_loss"][0] < 4.4
    trainer = history["trainer"]
    assert (trainer.scaler is not None) == (precision == "fp16")
    assert all(p.dtype == np.float32 for p in model.parameters())          # float32 master weights
    if trainer.scaler is not None:
        assert len(trainer.scaler.history) == 20


def test_the_command_trains_samples_saves_and_measures(tmp_path, capsys):
    path = tmp_path / "gpt.npz"
    assert train.main(["--model", "transformer", *TINY, "--lr", "1e-2", "--warmup", "5", "--generate", "40",
                       "--save", str(path)]) == 0
    out = capsys.readouterr().out
    val = float(re.search(r"validation: ([\d.]+) bits/char", out).group(1))
    unigram = float(re.search(r"unigram baseline ([\d.]+) bits/char", out).group(1))
    assert unigram == pytest.approx(4.470, abs=1e-3) and val < 5.0 < math.log2(81)      # (untrained: log2(81))
    assert "reloaded: validation loss identical" in out
    sample = out.split("---\n")[1]
    assert sample.startswith("PHILOSOPHY, n.  ") and len(sample.rstrip("\n")) == len("PHILOSOPHY, n.  ") + 40
    for claim in ("FLOPs per token", "against the closed form: forward 1.0000, backward 1.0000",
                  "backward time / forward time", "peak saved activations", "under no_grad saves 0 B",
                  "tokens/s (forward+backward+AdamW)"):
        assert claim in out, out
    # the saved weights load into a fresh model and give the same validation loss
    assert train.main(["--model", "transformer", *TINY, "--load", str(path), "--generate", "0",
                       "--no-figures"]) == 0
    again = capsys.readouterr().out
    assert f"validation: {val:.3f} bits/char" in again


def test_bad_arguments_are_named(capsys):
    with pytest.raises(SystemExit):
        train.main(["--model", "transformer", "--steps", "0"])
    assert "--steps must be >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.main(["--model", "transformer", "--compile", "--precision", "bf16"])
    assert "--compile replays fp32" in capsys.readouterr().err
    with pytest.raises(ValueError, match="d_model .* must be a multiple of n_head"):
        GPTConfig(vocab_size=5, d_model=10, n_head=4)


def test_lm_loss_is_the_mean_next_character_cross_entropy(corpus):
    model = tiny(corpus)
    x, y = corpus.batch("train", 2, 32, generator=np.random.default_rng(0))
    logits = model(x).data.astype(np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    want = -np.take_along_axis(logp, y.data[..., None], -1).mean()
    assert float(lm_loss(model(x), y).item()) == pytest.approx(want, rel=1e-5)
