"""``python -m chainrule train``: train an MLP (or a small CNN) on the embedded UCI digits, or
(``--model transformer``, ``train/lm.py``) a character-level GPT on *The Devil's Dictionary*.

The loop is ``fit(model, optimizer, loader, ..., step=train_step)``: forward, loss, backward and
update live in the step function, so a variant (mixed precision, loss scaling) swaps only that.

``--nproc N`` re-launches the job under the mpich wheel's ``mpiexec -n N`` (the ``mpi`` extra):
each process takes batch/N examples of every batch (``DistributedSampler`` over the order one
process would draw), the model is wrapped in ``DistributedDataParallel``, and rank 0 prints the
metrics, which equal one process's up to float rounding.
"""
from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time
from typing import Any, Callable

from chainrule import data, nn, optim
from chainrule.amp.mixed_precision import GradScaler, autocast
from chainrule.amp.precision import StaleMeter, grad_stats, plot_scale, summarize
from chainrule.core._backend import np
from chainrule.core._dtypes import bfloat16, float16, float32
from chainrule.core.grad_mode import no_grad
from chainrule.core.tensor import Tensor
from chainrule.distributed import collectives as dist
from chainrule.func.compile import compile as compile_step
from chainrule.nn import functional as F
from chainrule.nn.parallel import DistributedDataParallel
from chainrule.train import lm
from chainrule.train._launch import _progress, _silent, relaunch
from chainrule.train._launch import find_mpiexec as find_mpiexec  # (tests and tools use them from here)
from chainrule.train._launch import launch_env as launch_env
from chainrule.utils._plotting import pyplot

StepFn = Callable[[nn.Module, optim.Optimizer, Tensor, Tensor], float]


class MixedPrecisionStep:
    """A training step for ``train.fit(step=...)`` in ``"fp32"``, ``"bf16"`` or ``"fp16"``.

    bf16: ``autocast(bfloat16)`` with the float32 parameters as master weights; fp16:
    ``autocast(float16)`` plus a dynamic ``GradScaler``. ``history`` has per-step diagnostics.

    >>> from chainrule.train import MixedPrecisionStep
    >>> step = MixedPrecisionStep("fp16")
    >>> step.dtype, step.scaler.get_scale()
    (dtype('float16'), 65536.0)
    """

    DTYPES = {"fp32": float32, "bf16": bfloat16, "fp16": float16}

    def __init__(self, precision: str = "bf16") -> None:
        if precision not in self.DTYPES:
            raise ValueError(f"MixedPrecisionStep: precision must be one of {sorted(self.DTYPES)}, "
                             f"got {precision!r}")
        self.precision, self.dtype = precision, np.dtype(self.DTYPES[precision])
        self.scaler = GradScaler() if precision == "fp16" else None
        self.history: list[dict] = []

    def __call__(self, model: Any, optimizer: Any, xb: Any, yb: Any) -> float:
        optimizer.zero_grad()
        with autocast(self.dtype, enabled=self.precision != "fp32"):
            loss = F.cross_entropy(model(xb), yb)
        params = [p for g in optimizer.param_groups for p in g["params"]]
        if self.scaler is None:
            loss.backward()
            stats = grad_stats(params)
            meter = StaleMeter(params, self.dtype)
            optimizer.step()
            stats["stale"] = meter.fraction()
            self.history.append(stats)
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(optimizer)
            self.scaler.update()
            self.history.append(self.scaler.history[-1])
        return float(loss.item())

    def summary(self) -> str:
        return f"{self.precision}: {summarize(self.history)}"


def build_model(kind: str, n_features: int, n_classes: int, generator: Any = None) -> nn.Module:
    """``mlp``: 64-256-10 ReLU network; ``cnn``: two 3x3 conv + max-pool blocks and a linear head."""
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(n_features, 256, generator=generator), nn.ReLU(),
                             nn.Linear(256, n_classes, generator=generator))
    if kind == "cnn":
        side = math.isqrt(n_features)
        if side * side != n_features or side < 4:
            raise ValueError(f"train --model cnn needs square images, but the data has {n_features} "
                             f"features per example; use --model mlp")
        flat = 32 * (side // 4) ** 2
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, generator=generator), nn.ReLU(),
                             nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1, generator=generator), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(flat, n_classes, generator=generator))
    raise ValueError(f"train: unknown model {kind!r}; use 'mlp' or 'cnn'")


def _update(model: nn.Module, optimizer: optim.Optimizer, xb: Tensor, yb: Tensor) -> Tensor:
    optimizer.zero_grad()
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    optimizer.step()
    return loss.detach()


def train_step(model: nn.Module, optimizer: optim.Optimizer, xb: Tensor, yb: Tensor) -> float:
    """One update: forward, cross-entropy, backward, optimizer step. Returns the batch loss."""
    return float(_update(model, optimizer, xb, yb).item())


class CompiledStep:
    """``train_step`` under ``cr.compile`` (``--compile``): the update is captured once and replayed.
    The loss is read outside the compiled function (a ``.item()`` inside it would be a value guard
    that every new loss misses); a new batch shape (the last batch) means a new capture, hence
    ``max_captures`` (a new learning rate does not: the taped ``opt.step()`` reads it).

    >>> import chainrule as cr
    >>> model = cr.nn.Linear(3, 2); opt = cr.optim.SGD(model.parameters(), lr=0.1)
    >>> step = CompiledStep()
    >>> x, y = cr.ones((4, 3)), cr.tensor([0, 1, 1, 0])
    >>> losses = [step(model, opt, x, y) for _ in range(3)]
    >>> step.compiled.cache_info()
    CacheInfo(captures=1, replays=2, eager_runs=0, misses=0)
    """

    def __init__(self, max_captures: int = 64) -> None:
        self.compiled = compile_step(_update, max_captures=max_captures)

    def __call__(self, model: Any, optimizer: Any, xb: Any, yb: Any) -> float:
        return float(self.compiled(model, optimizer, xb, yb).item())


def epoch_seconds(step: StepFn, model: nn.Module, optimizer: optim.Optimizer, loader: Any) -> float:
    """The wall time of one epoch of ``step`` on a copy of the model and optimizer (left untouched)."""
    model, optimizer = copy.deepcopy((model, optimizer))
    model.train()
    start = time.perf_counter()
    for xb, yb in loader:
        step(model, optimizer, xb, yb)
    return time.perf_counter() - start


def evaluate(model: nn.Module, x: np.ndarray, y: np.ndarray, batch_size: int = 512) -> tuple[float, float]:
    """(mean loss, accuracy) of ``model`` on (x, y), in eval mode and under ``no_grad``.

    >>> import chainrule as cr, numpy as np
    >>> model = cr.nn.Linear(2, 2)
    >>> _ = cr.nn.init.zeros_(model.weight), cr.nn.init.zeros_(model.bias)
    >>> loss, acc = evaluate(model, np.ones((4, 2), np.float32), np.array([0, 1, 1, 1]))
    >>> round(loss, 4), acc                      # equal logits: loss log 2, argmax picks class 0
    (0.6931, 0.25)
    """
    if len(x) == 0:
        raise ValueError("evaluate: the dataset is empty (0 examples), so loss and accuracy are "
                         "undefined; pass at least one example (check the train/test split)")
    was_training = model.training
    model.eval()
    total_loss, correct = 0.0, 0
    with no_grad():
        for xb, yb in data.DataLoader(x, y, batch_size):
            logits = model(xb)
            total_loss += float(F.cross_entropy(logits, yb, reduction="sum").item())
            correct += int((np.argmax(logits.data, axis=1) == yb.data).sum())
    model.train(was_training)
    return total_loss / len(x), correct / len(x)


def fit(model: nn.Module, optimizer: optim.Optimizer, loader: data.DataLoader, x_val: np.ndarray,
        y_val: np.ndarray, epochs: int, step: StepFn = train_step, scheduler: Any = None,
        progress: bool = True, log: Callable[[str], None] = print) -> dict:
    """Train for ``epochs``; validate after each under ``no_grad``. Returns the per-epoch history."""
    if len(loader) == 0:
        raise ValueError(f"fit: the loader yields no batches ({len(loader.x)} examples, batch_size="
                         f"{loader.batch_size}, drop_last={loader.drop_last}); use a smaller "
                         f"batch_size or drop_last=False")
    history: dict = {"train_loss": [], "val_loss": [], "val_acc": []}
    for epoch in range(1, epochs + 1):
        model.train()
        losses = [step(model, optimizer, xb, yb)
                  for xb, yb in _progress(loader, len(loader), f"epoch {epoch}/{epochs}", progress)]
        if scheduler is not None:
            scheduler.step()
        val_loss, val_acc = evaluate(model, x_val, y_val)
        history["train_loss"].append(float(np.mean(losses)))
        history["val_loss"].append(val_loss)
        history["val_acc"].append(val_acc)
        log(f"epoch {epoch:3d}/{epochs}  train loss {history['train_loss'][-1]:.4f}  "
            f"test loss {val_loss:.4f}  test acc {val_acc:.2%}")
    return history


def prepare(path: str | None, kind: str, seed: int) -> tuple:
    """Load (the digits or ``path``), scale features to [0, 1], split 80/20, shape for the model."""
    if path is None:
        images, labels = data.load_digits()
        x = images.reshape(len(images), -1)
    else:
        x, labels = data.load_arrays(path)
        x = x.reshape(len(x), -1)
    x = x.astype(np.float32)
    scale = float(np.abs(x).max()) or 1.0
    x_tr, y_tr, x_te, y_te = data.train_test_split(x / scale, labels, 0.2, seed)
    n_features, n_classes = x.shape[1], int(labels.max()) + 1
    if kind == "cnn":
        side = math.isqrt(n_features)
        if side * side == n_features:
            x_tr, x_te = x_tr.reshape(-1, 1, side, side), x_te.reshape(-1, 1, side, side)
    return x_tr, y_tr, x_te, y_te, n_features, n_classes


def save_plots(history: dict, out: str) -> list[str]:
    """Loss and accuracy curves as PNGs in ``out`` (needs matplotlib; returns [] without it)."""
    plt = pyplot()
    if plt is None:
        return []
    os.makedirs(out, exist_ok=True)
    epochs = range(1, len(history["val_acc"]) + 1)
    paths = []
    for name, curves, ylabel in (("loss", ("train_loss", "val_loss"), "cross-entropy"),
                                 ("accuracy", ("val_acc",), "test accuracy")):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for key in curves:
            ax.plot(epochs, history[key], marker="o", label=key.replace("_", " "))
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = os.path.join(out, f"{name}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m chainrule train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("mlp", "cnn", "transformer"), default="mlp",
                   help="transformer: a character-level GPT on The Devil's Dictionary (its own options: "
                        "python -m chainrule train --model transformer --help)")
    p.add_argument("--epochs", type=int, default=None, help="default: 30 (mlp), 15 (cnn)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=None, help="Adam learning rate (default 3e-3)")
    p.add_argument("--seed", type=int, default=0, help="seeds the split, the init and the shuffling")
    p.add_argument("--data", help="a .npz (x, y) or .csv (features..., label) file instead of the digits")
    p.add_argument("--out", help="directory for loss/accuracy PNGs (needs matplotlib)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="bf16: autocast + float32 master weights; fp16: autocast + dynamic loss scaling")
    p.add_argument("--compile", action="store_true",
                   help="capture the training step once and replay it (cr.compile): the same weights, "
                        "bitwise; prints the epoch time eager vs compiled")
    p.add_argument("--nproc", type=int, default=None,
                   help="data-parallel processes: re-launch under mpiexec -n NPROC, batch-size/NPROC "
                        "examples per process (needs pip install \"chainrule[mpi]\"); default: the "
                        "launcher's world size, else 1")
    return p


class _GlobalLoss:
    """A step that returns the batch loss averaged over the ranks (the loss of the whole batch)."""

    def __init__(self, step: StepFn) -> None:
        self.step = step

    def __call__(self, model: Any, optimizer: Any, xb: Any, yb: Any) -> float:
        loss = np.array([self.step(model, optimizer, xb, yb)])
        dist.all_reduce(loss, dist.ReduceOp.AVG)
        return float(loss[0])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _model_of(argv) == "transformer":
        return lm.main(argv)
    p = parser()
    args = p.parse_args(argv)
    if args.nproc is not None and args.nproc < 1:
        p.error(f"--nproc must be >= 1, got {args.nproc}")
    launched = dist.launched_by_mpi() is not None
    nproc = args.nproc or 1
    if nproc > 1 and args.batch_size % nproc:
        p.error(f"--batch-size {args.batch_size} does not split evenly over --nproc {nproc} processes; "
                f"use a batch size divisible by {nproc}")
    if args.compile and (args.precision != "fp32" or nproc > 1):
        p.error("--compile replays fp32 single-process steps; drop --precision/--nproc, or --compile")
    if nproc > 1 and not launched:
        return relaunch(args, argv, p)
    start = time.perf_counter()
    if launched:
        dist.init_process_group()
    world = dist.get_world_size() if launched else 1
    rank = dist.get_rank() if launched else 0
    if args.nproc is not None and args.nproc != world:
        p.error(f"--nproc {args.nproc} but the launcher started {world} processes; drop --nproc under "
                f"an MPI launcher, or make the two agree")
    if args.batch_size % world:
        p.error(f"--batch-size {args.batch_size} does not split evenly over {world} processes; use a "
                f"batch size divisible by {world}")
    out = print if rank == 0 else _silent
    rng = np.random.default_rng(args.seed)
    x_tr, y_tr, x_te, y_te, n_features, n_classes = prepare(args.data, args.model, args.seed)
    model = build_model(args.model, n_features, n_classes, generator=rng)
    epochs = args.epochs or (30 if args.model == "mlp" else 15)
    optimizer = optim.Adam(model.parameters(), lr=args.lr or 3e-3)
    scheduler = optim.CosineAnnealingLR(optimizer, T_max=epochs)
    # the order one process draws (from the generator that initialized the model), split by rank
    sampler = data.DistributedSampler(len(x_tr), num_replicas=world, rank=rank, generator=rng)
    loader = data.DataLoader(x_tr, y_tr, args.batch_size // world, sampler=sampler)
    n_params = sum(p.size for p in model.parameters())
    split = f" ({args.batch_size // world} on each of {world} processes)" if world > 1 else ""
    out(f"training a {args.model.upper()} ({n_params:,} parameters) on {len(x_tr)} examples, "
        f"testing on {len(x_te)}; {epochs} epochs, batch {args.batch_size}{split}, Adam + cosine schedule")
    mixed = MixedPrecisionStep(args.precision) if args.precision != "fp32" else None
    step: StepFn = mixed or (CompiledStep(2 * epochs + 4) if args.compile else train_step)
    if world > 1:
        model = DistributedDataParallel(model)
        step = _GlobalLoss(step)
    history = fit(model, optimizer, loader, x_te, y_te, epochs, scheduler=scheduler,
                  progress=not args.quiet and rank == 0, step=step, log=out)
    if mixed is not None:
        out(mixed.summary())
    wall = time.perf_counter() - start
    out(f"test accuracy {history['val_acc'][-1]:.2%}  (wall time {wall:.1f} s)")
    if args.compile:
        eager = epoch_seconds(train_step, model, optimizer, loader)
        compiled = epoch_seconds(CompiledStep(), model, optimizer, loader)
        out(f"epoch time: eager {eager:.3f} s, compiled {compiled:.3f} s ({eager / compiled:.2f}x, its "
            f"captures included); the run's {step.compiled.cache_info()}")
    if args.out and rank == 0:
        paths = save_plots(history, args.out)
        if mixed is not None and mixed.scaler is not None \
                and plot_scale(mixed.history, os.path.join(args.out, "loss_scale.png")):
            paths.append(os.path.join(args.out, "loss_scale.png"))
        print("plots: " + ", ".join(paths) if paths else
              "plots skipped: matplotlib is not installed (pip install 'chainrule[plot]')")
    if launched:
        dist.destroy_process_group()
    return 0


def _model_of(argv: list[str]) -> str | None:
    """The ``--model`` value in ``argv`` (``--model X`` or ``--model=X``), if any."""
    for i, a in enumerate(argv):
        if a == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--model="):
            return a.split("=", 1)[1]
    return None
