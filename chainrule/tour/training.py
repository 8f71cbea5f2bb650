"""Tour sections for training: a short run on the digits, and a picture of the graph."""
from __future__ import annotations

import os

import numpy as np

import chainrule as cr
from chainrule import train as tr
from chainrule.tour._sections import Context, section
from chainrule.train import figures, lm
from chainrule.train.transformer import GPT, GPTConfig


@section("training", "A training loop: forward, loss, backward, step; validation under no_grad",
         "the training loop of the seed: backward fills .grad, the optimizer updates in place, "
         "no_grad skips the graph when we only evaluate")
def training_run(ctx: Context) -> None:
    epochs = 3 if ctx.fast else 10
    rng = np.random.default_rng(0)
    x_tr, y_tr, x_te, y_te, n_features, n_classes = tr.prepare(None, "mlp", seed=0)
    if ctx.fast:
        x_tr, y_tr = x_tr[:600], y_tr[:600]
    model = tr.build_model("mlp", n_features, n_classes, generator=rng)
    optimizer = cr.optim.Adam(model.parameters(), lr=3e-3)
    loader = cr.data.DataLoader(x_tr, y_tr, batch_size=32, shuffle=True, generator=rng)
    ctx.say(f"MLP with {sum(p.size for p in model.parameters()):,} parameters, {len(x_tr)} training "
            f"digits, {len(x_te)} test digits, {epochs} epochs of Adam")
    history = tr.fit(model, optimizer, loader, x_te, y_te, epochs, progress=False,
                     log=lambda line: ctx.say("    " + line))
    ctx.say(f"test accuracy after {epochs} epochs: {history['val_acc'][-1]:.2%}")
    xb = cr.tensor(x_te[:64])
    loss = cr.nn.functional.cross_entropy(model(xb), y_te[:64])
    with cr.no_grad():
        loss_ng = cr.nn.functional.cross_entropy(model(xb), y_te[:64])
    ctx.say(f"the same loss with a graph: grad_fn={loss.grad_fn.name}; under no_grad: "
            f"grad_fn={loss_ng.grad_fn} (nothing recorded, nothing saved)")
    if ctx.out:
        paths = tr.save_plots(history, ctx.out)
        ctx.say("plots: " + ", ".join(paths) if paths else
                "plots skipped: matplotlib is not installed (pip install 'chainrule[plot]')")


@section("graph_picture", "A picture of the graph: grad_fn nodes, leaves, saved tensors",
         "the dynamic graph that backward walks; each node keeps what its derivative needs")
def graph_picture(ctx: Context) -> None:
    rng = np.random.default_rng(0)
    model = cr.nn.Sequential(cr.nn.Linear(4, 3, generator=rng), cr.nn.Tanh(),
                             cr.nn.Linear(3, 2, generator=rng))
    x = cr.tensor(rng.normal(size=(5, 4)).astype(np.float32))
    loss = cr.nn.functional.cross_entropy(model(x), np.array([0, 1, 0, 1, 1]))
    params = dict(model.named_parameters())
    dot = cr.viz.to_dot(loss, params)
    n_ops = dot.count("shape=box") - 1
    n_leaves = dot.count("shape=ellipse")
    saved = sum(cr.viz.saved_bytes(n) for n in cr.viz.nodes(loss))
    ctx.say(f"graph of a 4-3-2 tanh MLP's loss: {n_ops} op nodes, {n_leaves} leaves (the parameters), "
            f"{saved} bytes saved for backward")
    leaves = [line.strip() for line in dot.splitlines() if "shape=ellipse" in line]
    ctx.say("the leaves in the DOT text:\n    " + "\n    ".join(leaves))
    if ctx.out:
        path = cr.viz.render(loss, os.path.join(ctx.out, "graph.png"), params, title="MLP loss")
        ctx.say(f"graph picture: {path}")



@section("transformer", "A transformer on text: activation memory and C ≈ 6ND measured on a GPT",
         "activation memory grows with batch x depth x width x sequence and dominates training; "
         "no_grad frees it, checkpointing cuts it; training costs about 6 FLOPs per weight per token")
def transformer_run(ctx: Context) -> None:
    steps = 15 if ctx.fast else 60
    corpus = cr.data.CharCorpus.devils_dictionary()
    cr.random.manual_seed(0)
    cfg = GPTConfig(len(corpus.vocab), n_ctx=32, d_model=48, n_head=4, n_layer=4)
    model = GPT(cfg)
    args = lm.parser().parse_args(["--steps", str(steps), "--batch-size", "16", "--n-ctx", "32", "--lr", "1e-2",
                                   "--warmup", "5", "--eval-every", str(steps), "--quiet"])
    ctx.say(f"a character-level GPT ({cfg.n_layer} pre-norm blocks, d_model {cfg.d_model}, "
            f"{model.num_parameters():,} parameters) on The Devil's Dictionary, {steps} AdamW steps:")
    lm.train(model, corpus, args, log=lambda line: ctx.say("    " + line))
    ctx.say(f"    (unigram baseline: {corpus.unigram_bits():.3f} bits/char; "
            f"python -m chainrule train --model transformer trains the full one)")
    x, y = corpus.batch("train", 16, cfg.n_ctx, generator=np.random.default_rng(1))
    counted = figures.counted_flops(model, x, y)
    n = figures.closed_form_flops(cfg, 16)["n_matmul"]
    tokens = 16 * cfg.n_ctx
    mm = (counted["matmul_forward"] + counted["matmul_backward"]) / tokens
    ctx.say(f"FLOPs per token, forward+backward: matmuls {mm:,.0f} = {mm / (6 * n):.2f} x 6N "
            f"(N = {n:,}; the rest is attention's T x T products), all ops "
            f"{(counted['forward'] + counted['backward']) / tokens / (6 * n):.2f} x 6N")
    plain, sqrt = (figures.activation_bytes(model, x, y, m) for m in ("none", "sqrt"))
    ctx.say(f"saved activations for one batch: {plain / 2**20:.1f} MiB; with sqrt(L) checkpointing "
            f"{sqrt / 2**20:.1f} MiB ({sqrt / plain:.2f}x); under no_grad "
            f"{figures.forward_saved_bytes(model, x, y, grad=False)} B")
    for what, b, t, layers, _, ratio in figures.scaling_table(cfg, corpus, 4)[1:]:
        ctx.say(f"    {what} doubled (batch {b}, n_ctx {t}, n_layer {layers}): saved bytes x{ratio:.2f}")
