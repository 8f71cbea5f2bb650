"""``python -m chainrule train --model transformer``: train the character-level GPT of
``train/transformer.py`` on the shipped *Devil's Dictionary*, sample from it, and measure the seeds'
claims on it (``train/figures.py``).

``--nproc N`` re-launches under ``mpiexec -n N`` (as the digits run): every process draws the same
global batch and trains on its 1/N of the rows; ``DistributedDataParallel`` averages the gradients,
so the run follows one process's with the same global batch up to float rounding.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

from chainrule import data, optim
from chainrule.amp.mixed_precision import GradScaler, autocast
from chainrule.core._backend import np
from chainrule.core._dtypes import bfloat16, float16, float32
from chainrule.core.random import manual_seed
from chainrule.core.tensor import Tensor
from chainrule.distributed import collectives as dist
from chainrule.func.compile import compile as compile_step
from chainrule.nn.parallel import DistributedDataParallel
from chainrule.nn.utils.clip_grad import clip_grad_norm_
from chainrule.train._launch import _progress, _silent, relaunch
from chainrule.train.figures import report
from chainrule.train.transformer import (
    CHECKPOINTS,
    GPT,
    GPTConfig,
    _replayable,
    bits,
    evaluate,
    lm_loss,
    param_groups,
    warmup_cosine,
)
from chainrule.utils._plotting import pyplot
from chainrule.utils.serialization import load, save

PRECISIONS = {"fp32": float32, "bf16": bfloat16, "fp16": float16}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m chainrule train --model transformer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("transformer",), default="transformer")
    p.add_argument("--steps", type=int, default=600, help="optimizer steps (default 600)")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per step (global, over all processes)")
    p.add_argument("--n-ctx", type=int, default=64, help="context length in characters")
    p.add_argument("--d-model", type=int, default=96)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate")
    p.add_argument("--warmup", type=int, default=50, help="linear warm-up steps, then cosine decay")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="clip_grad_norm_'s max norm")
    p.add_argument("--seed", type=int, default=0, help="seeds the split, the init, the batches, the sampling")
    p.add_argument("--checkpoint", choices=CHECKPOINTS, default="none",
                   help="block: recompute every block in backward; sqrt: sqrt(n_layer) segments")
    p.add_argument("--precision", choices=tuple(PRECISIONS), default="fp32",
                   help="bf16: autocast, float32 master weights, no loss scaling; fp16: autocast + GradScaler")
    p.add_argument("--compile", action="store_true", help="replay forward+backward with cr.compile")
    p.add_argument("--nproc", type=int, default=None, help="data-parallel processes under mpiexec (mpi extra)")
    p.add_argument("--eval-every", type=int, default=100, help="validation loss every N steps")
    p.add_argument("--generate", type=int, default=300, metavar="N", help="characters to sample after training")
    p.add_argument("--prompt", default="PHILOSOPHY, n.  ", help="the text generation starts from")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--save", metavar="PATH", help="save the trained model's state_dict (cr.save)")
    p.add_argument("--load", metavar="PATH", help="load weights (cr.load) instead of training")
    p.add_argument("--plot", metavar="DIR", help="write the loss curves as a PNG there (plot extra)")
    p.add_argument("--history", metavar="PATH", help="write the per-step losses as JSON")
    p.add_argument("--no-figures", dest="figures", action="store_false",
                   help="skip the seeds' measurements after training")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


class Trainer:
    """The model, its optimizer and schedule, and one training step in the chosen precision.

    ``step(x, y)`` runs forward, backward, clipping and the update, and returns the batch loss
    (averaged over the processes under DDP). With ``compile`` the forward+backward part is a
    ``cr.compile`` step; clipping and the update run eagerly on the gradients it writes.
    """

    def __init__(self, model: GPT, args: argparse.Namespace, world: int = 1) -> None:
        self.model, self.args, self.world = model, args, world
        self.net = DistributedDataParallel(model) if world > 1 else model
        self.params = list(model.parameters())
        self.opt = optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.95))
        self.sched = optim.lr_scheduler.LambdaLR(self.opt, warmup_cosine(args.warmup, args.steps))
        self.dtype = np.dtype(PRECISIONS[args.precision])
        self.scaler = GradScaler() if args.precision == "fp16" else None
        self.grad_norms: list[float] = []
        self.forward_backward = compile_step(_replayable(self.net), max_captures=4) if args.compile \
            else self._forward_backward

    def _loss(self, x: Tensor, y: Tensor) -> Tensor:
        return lm_loss(self.net(x), y)

    def _forward_backward(self, x: Tensor, y: Tensor) -> Tensor:
        self.opt.zero_grad()
        with autocast(self.dtype, enabled=self.args.precision != "fp32"):
            loss = self._loss(x, y)
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()
        return loss.detach()

    def step(self, x: Tensor, y: Tensor) -> float:
        """One training step on this process's rows; the batch loss."""
        loss = self.forward_backward(x, y)
        if self.scaler is not None:
            self.scaler.unscale_(self.opt)
        self.grad_norms.append(float(clip_grad_norm_(self.params, self.args.clip).item()))
        if self.scaler is not None:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()
        self.sched.step()
        value = float(loss.item())
        if self.world > 1:
            buf = np.array([value])
            dist.all_reduce(buf, dist.ReduceOp.AVG)
            value = float(buf[0])
        return value


def scale_history(history: list[dict]) -> str:
    """GradScaler's scale over the run as runs of steps, and the steps it skipped.

    >>> scale_history([{"scale": 4.0, "skipped": False}] * 2 + [{"scale": 2.0, "skipped": True}])
    'scale 4 (steps 1-2), 2 (step 3); 1 skipped step: 3'
    """
    runs: list[list] = []
    for i, h in enumerate(history, 1):
        if runs and runs[-1][0] == h["scale"]:
            runs[-1][2] = i
        else:
            runs.append([h["scale"], i, i])
    spans = ", ".join(f"{v:g} (step {a})" if a == b else f"{v:g} (steps {a}-{b})" for v, a, b in runs)
    skipped = [i for i, h in enumerate(history, 1) if h["skipped"]]
    shown = ", ".join(map(str, skipped[:10])) + (", ..." if len(skipped) > 10 else "")
    return (f"scale {spans}; {len(skipped)} skipped step{'' if len(skipped) == 1 else 's'}"
            + (f": {shown}" if skipped else ""))


def global_batch(corpus: data.CharCorpus, args: argparse.Namespace, rng: Any, rank: int, world: int) -> tuple:
    """This process's rows of the step's global batch: every process draws the same batch from the
    same generator and keeps its 1/world of the rows."""
    x, y = corpus.batch("train", args.batch_size, args.n_ctx, generator=rng)
    share = args.batch_size // world
    return (x, y) if world == 1 else (x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share])


def train(model: GPT, corpus: data.CharCorpus, args: argparse.Namespace, rank: int = 0, world: int = 1,
          log: Any = print) -> dict:
    """``args.steps`` steps; validation every ``args.eval_every``. Returns the history."""
    trainer = Trainer(model, args, world)
    rng = np.random.default_rng(args.seed + 1)
    history: dict = {"step": [], "train_loss": [], "val_step": [], "val_loss": [], "step_seconds": [],
                     "lr": []}
    bar = _progress(range(1, args.steps + 1), args.steps, "training", not args.quiet and rank == 0)
    for s in bar:
        x, y = global_batch(corpus, args, rng, rank, world)
        start = time.perf_counter()
        loss = trainer.step(x, y)
        history["step_seconds"].append(time.perf_counter() - start)
        history["step"].append(s)
        history["train_loss"].append(loss)
        history["lr"].append(trainer.opt.param_groups[0]["lr"])
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        if s % args.eval_every == 0 or s == args.steps:
            val = evaluate(model, corpus)
            history["val_step"].append(s)
            history["val_loss"].append(val)
            log(f"step {s:5d}/{args.steps}  train loss {loss:.4f}  val loss {val:.4f} "
                f"({bits(val):.3f} bits/char)")
    history["trainer"] = trainer
    return history


def save_plot(history: dict, out: str, unigram_nats: float) -> str | None:
    """The loss curves (train per step, validation, the unigram baseline) as ``out/lm_loss.png``."""
    plt = pyplot()
    if plt is None:
        return None
    os.makedirs(out, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(history["step"], [bits(v) for v in history["train_loss"]], lw=0.8, alpha=0.7, label="train")
    ax.plot(history["val_step"], [bits(v) for v in history["val_loss"]], marker="o", label="validation")
    ax.axhline(bits(unigram_nats), color="gray", ls="--", label="unigram baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("bits per character")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, "lm_loss.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    args = p.parse_args(argv)
    for name in ("steps", "batch_size", "n_ctx", "d_model", "n_layer", "n_head", "eval_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    nproc = args.nproc or 1
    launched = dist.launched_by_mpi() is not None
    if args.compile and (args.precision != "fp32" or nproc > 1 or args.checkpoint != "none"):
        p.error("--compile replays fp32 single-process steps without checkpointing; drop "
                "--precision/--nproc/--checkpoint, or --compile")
    if nproc > 1 and args.batch_size % nproc:
        p.error(f"--batch-size {args.batch_size} does not split evenly over --nproc {nproc} processes")
    if nproc > 1 and not launched:
        return relaunch(args, argv, p)
    world, rank = 1, 0
    if launched:
        dist.init_process_group()
        world, rank = dist.get_world_size(), dist.get_rank()
    out = print if rank == 0 else _silent
    start = time.perf_counter()
    manual_seed(args.seed)
    corpus = data.CharCorpus.devils_dictionary(val_fraction=0.1, seed=args.seed)
    cfg = GPTConfig(vocab_size=len(corpus.vocab), n_ctx=args.n_ctx, d_model=args.d_model,
                    n_head=args.n_head, n_layer=args.n_layer, dropout=args.dropout)
    model = GPT(cfg, checkpoint=args.checkpoint)
    unigram = corpus.unigram_bits() * math.log(2)
    out(f"The Devil's Dictionary: {len(corpus.train):,} training and {len(corpus.val):,} validation "
        f"characters ({corpus.entries[0]} + {corpus.entries[1]} entries), {len(corpus.vocab)} symbols")
    out(f"a GPT of {cfg.n_layer} blocks, d_model {cfg.d_model}, {cfg.n_head} heads, n_ctx {cfg.n_ctx}: "
        f"{model.num_parameters():,} parameters; {args.steps} steps of batch {args.batch_size}"
        f"{f' ({args.batch_size // world} on each of {world} processes)' if world > 1 else ''}, "
        f"AdamW + warm-up/cosine, {args.precision}{', compiled' if args.compile else ''}"
        f"{f', checkpoint {args.checkpoint}' if args.checkpoint != 'none' else ''}")
    history: dict = {}
    if args.load:
        model.load_state_dict(load(args.load))
        out(f"loaded weights from {args.load}")
    else:
        history = train(model, corpus, args, rank, world, log=out)
    val = evaluate(model, corpus)
    out(f"validation: {bits(val):.3f} bits/char ({val:.4f} nats); unigram baseline "
        f"{bits(unigram):.3f} bits/char")
    if args.save and rank == 0:
        save(model.state_dict(), args.save)
        again = GPT(cfg)
        again.load_state_dict(load(args.save))
        same = evaluate(again, corpus) == val
        out(f"saved to {args.save}; reloaded: validation loss {'identical' if same else 'DIFFERENT'}")
    if args.generate and rank == 0:
        prompt = corpus.encode(args.prompt)
        text = corpus.decode(model.generate(prompt, args.generate, args.temperature, args.top_k,
                                            generator=np.random.default_rng(args.seed)))
        out(f"--- sampled (temperature {args.temperature}, top-k {args.top_k}) ---\n{args.prompt}{text}\n---")
    trainer = history.pop("trainer", None)
    if trainer is not None and trainer.scaler is not None:
        out("fp16 loss scaling: " + scale_history(trainer.scaler.history))
    if history:
        steps = history["step_seconds"][len(history["step_seconds"]) // 10:]
        out(f"median step {1000 * float(np.median(steps)):.1f} ms, "
            f"{args.batch_size * args.n_ctx / float(np.median(steps)):,.0f} tokens/s; "
            f"wall time {time.perf_counter() - start:.1f} s")
    if args.history and rank == 0:
        with open(args.history, "w") as f:
            json.dump({k: v for k, v in history.items() if k != "trainer"} | {"final_val_loss": val}, f)
    if args.plot and rank == 0:
        path = save_plot(history, args.plot, unigram) if history else None
        out(f"plot: {path}" if path else "plot skipped: matplotlib is not installed (pip install 'chainrule[plot]')")
    if args.figures and rank == 0 and world == 1:
        for line in report(model, corpus, args):
            out(line)
    if launched:
        dist.destroy_process_group()
    return 0
